//! Candid arguments decoded strictly: a value present on the wire but of another type than the
//! method takes is refused, naming the argument, the field and the type sent; it is never read
//! as absent.
//!
//! Candid's own decoder reads an `opt` whose value does not match the expected type as `null`
//! (the specification's special rule for `opt`, meant for upgrades). For a batch method that
//! rule changes what a call means: a batch key sent as `created_at_time = 5 : nat` where the
//! method takes `nat64` would run the batch unkeyed, so a retry applies it twice; a declared
//! parameter `due_ns = opt (5 : nat)` where it is `opt int64` would be stored as `NULL` and
//! acknowledged as committed. Every method of the library (`update!`, and so
//! `canister_methods!`, `client_batches!`, `single_writes!`) and its `init` and
//! `post_upgrade` check the argument's wire types with [`check`] before they decode it.
//!
//! What stays accepted is what Candid's subtyping accepts without that rule: a missing
//! argument or record field of an `opt` type is `null`, a `null` or `reserved` value of an
//! `opt` is `null` (so is an `opt null`, `opt reserved` or `opt empty`, which can carry no
//! value), extra record fields and extra arguments are ignored, `nat` is read as `int`, a value
//! `v` where `opt T` is expected is `opt v` when `v` is a `T`. The check reads types, not
//! values: an `opt` of another type is refused even when this call's value is `null`, since the
//! client's next call with a value would be read as `null` too. The `.did` files stay as they
//! are.
//!
//! Cost: parsing the type table and walking it against the expected types, a few thousand
//! instructions per argument type; the type tables this check accepted are remembered (per
//! argument type, [`REMEMBERED_TABLES`] of them), so a client's repeated calls pay a
//! comparison of their table's bytes.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::io::Cursor;

use binrw::BinRead;
use candid::CandidType;
use candid::binary_parser::Header;
use candid::types::subtype::{OptReport, subtype_with_config};
use candid::types::{Field, Label, Type, TypeEnv, TypeInner};
use candid::utils::ArgumentDecoder;

/// The type tables remembered per argument type once they passed the check.
pub const REMEMBERED_TABLES: usize = 8;

/// The most bytes of a type table read (as Candid's decoder bounds it: 64 KiB).
const MAX_TABLE_BYTES: usize = 64 * 1024;

/// The Candid types of a method's arguments: a tuple of [`CandidType`]s, as
/// `candid::utils::ArgumentDecoder` decodes it.
pub trait ArgumentTypes: 'static {
    /// Each argument's type, in order.
    fn types() -> Vec<Type>;
}

macro_rules! argument_types {
    ($($t:ident),*) => {
        impl<$($t: CandidType + 'static),*> ArgumentTypes for ($($t,)*) {
            fn types() -> Vec<Type> {
                vec![$($t::ty()),*]
            }
        }
    };
}

argument_types!();
argument_types!(A);
argument_types!(A, B);
argument_types!(A, B, C);
argument_types!(A, B, C, D);
argument_types!(A, B, C, D, E);
argument_types!(A, B, C, D, E, F);
argument_types!(A, B, C, D, E, F, G);
argument_types!(A, B, C, D, E, F, G, H);

/// Why an argument was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentError {
    /// A value on the wire has a type the method does not take where it is: `argument` is its
    /// argument's name, `path` where in it (`field created_at_time`, `variant add, field
    /// due_ns`, `an element`), `sent` the type on the wire and `expected` the method's.
    Mismatch {
        /// The argument's name.
        argument: String,
        /// Where in the argument, outermost first (empty: the argument itself).
        path: Vec<String>,
        /// The type the caller sent there.
        sent: String,
        /// The type the method takes there.
        expected: String,
    },
    /// The bytes are not a Candid message of the method's arguments (Candid's own error).
    Undecodable(String),
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgumentError::Mismatch {
                argument,
                path,
                sent,
                expected,
            } => {
                write!(f, "argument {argument}")?;
                for step in path {
                    write!(f, ", {step}")?;
                }
                write!(
                    f,
                    ": {sent} sent where {expected} is expected (a value of another type is \
                     refused, never read as null)"
                )
            }
            ArgumentError::Undecodable(e) => write!(f, "the arguments are not Candid: {e}"),
        }
    }
}

impl std::error::Error for ArgumentError {}

thread_local! {
    /// Type tables (the bytes from `DIDL` to the first value) that passed the check in
    /// [`decode`], with their argument type: at most [`REMEMBERED_TABLES`] per type, oldest
    /// first.
    static ACCEPTED: RefCell<Vec<(TypeId, Box<[u8]>)>> = const { RefCell::new(Vec::new()) };
}

/// Checks that every value of `bytes` (a Candid message of arguments named `names`, empty bytes
/// being no arguments) is of a type `A` takes where it stands, without the special rule for
/// `opt` (see the [module documentation](self)); the values themselves are not read.
pub fn check<A: ArgumentTypes>(bytes: &[u8], names: &[&str]) -> Result<(), ArgumentError> {
    check_table::<A>(with_empty_as_none(bytes), names).map(|_| ())
}

/// [`check`], answering the length of the type table that passed.
fn check_table<A: ArgumentTypes>(bytes: &[u8], names: &[&str]) -> Result<usize, ArgumentError> {
    // At most as many bytes of type table as Candid's decoder reads.
    let mut cursor = Cursor::new(&bytes[..bytes.len().min(MAX_TABLE_BYTES)]);
    let header = Header::read_le_args(&mut cursor, (None,))
        .map_err(|e| ArgumentError::Undecodable(e.to_string()))?;
    let (env, sent) = header
        .to_types()
        .map_err(|e| ArgumentError::Undecodable(e.to_string()))?;
    let expected = A::types();
    for (i, (sent, expected)) in sent.iter().zip(&expected).enumerate() {
        let mut walk = Walk {
            env: &env,
            path: Vec::new(),
            assumed: HashSet::new(),
        };
        walk.check(sent, expected).map_err(|(sent, expected)| {
            let argument = names
                .get(i)
                .map_or_else(|| format!("{i}"), |name| (*name).to_owned());
            ArgumentError::Mismatch {
                argument,
                path: walk.path,
                sent,
                expected,
            }
        })?;
    }
    Ok(cursor.position() as usize)
}

/// Whether the type table `bytes` start with passed the check for `A` before.
fn remembered<A: ArgumentTypes>(bytes: &[u8]) -> bool {
    let id = TypeId::of::<A>();
    ACCEPTED.with_borrow(|accepted| {
        accepted
            .iter()
            .any(|(of, table)| *of == id && bytes.starts_with(table))
    })
}

/// Remembers `table` as passed for `A`, forgetting `A`'s oldest beyond [`REMEMBERED_TABLES`].
fn remember<A: ArgumentTypes>(table: &[u8]) {
    let id = TypeId::of::<A>();
    ACCEPTED.with_borrow_mut(|accepted| {
        if accepted.iter().filter(|(of, _)| *of == id).count() == REMEMBERED_TABLES
            && let Some(oldest) = accepted.iter().position(|(of, _)| *of == id)
        {
            accepted.remove(oldest);
        }
        accepted.push((id, table.into()));
    });
}

/// [`check`]s `bytes`, then decodes them as `A` as ic-cdk decodes a method's arguments (with its
/// skipping quota against costly unknown fields).
pub fn decode<A>(bytes: &[u8], names: &[&str]) -> Result<A, ArgumentError>
where
    A: ArgumentTypes + for<'a> ArgumentDecoder<'a>,
{
    let bytes = with_empty_as_none(bytes);
    if !remembered::<A>(bytes) {
        let table = check_table::<A>(bytes, names)?;
        remember::<A>(&bytes[..table]);
    }
    let mut config = candid::DecoderConfig::new();
    config.set_skipping_quota(10_000);
    candid::utils::decode_args_with_config(bytes, &config).map_err(undecodable)
}

/// The most bytes of an [`ArgumentError::Undecodable`]'s text.
pub const MAX_UNDECODABLE_BYTES: usize = 512;

/// What Candid's decoder found wrong with the values: its first error (the value's own, such as
/// `the batch key's id has 15 bytes; it must have 16`), at most [`MAX_UNDECODABLE_BYTES`].
/// Candid's own text is its decoder's state, with the whole argument in hexadecimal: twice the
/// argument's size, more than a reply may hold for a large batch.
fn undecodable(error: candid::Error) -> ArgumentError {
    let mut text = match &error {
        candid::Error::Custom(e) => e.root_cause().to_string(),
        other => other.to_string(),
    };
    batch_types::reply::truncate_message(&mut text, MAX_UNDECODABLE_BYTES);
    ArgumentError::Undecodable(text)
}

/// No bytes at all is a call without arguments (as ic-cdk reads it).
fn with_empty_as_none(bytes: &[u8]) -> &[u8] {
    if bytes.is_empty() {
        b"DIDL\x00\x00"
    } else {
        bytes
    }
}

/// One argument's walk: where it is, and the pairs of types assumed related (recursive types).
struct Walk<'e> {
    env: &'e TypeEnv,
    path: Vec<String>,
    assumed: HashSet<(Type, Type)>,
}

/// The types at a refused place: (sent, expected), as text.
type Refused = (String, String);

impl Walk<'_> {
    fn trace(&self, t: &Type) -> Type {
        self.env.trace_type(t).unwrap_or_else(|_| t.clone())
    }

    fn refuse(&self, sent: &Type, expected: &Type) -> Result<(), Refused> {
        Err((describe(self.env, sent), describe(self.env, expected)))
    }

    /// A refusal found inside (`inner`) told at this place's types (`sent`, `expected`) when
    /// it was found right there, at the same `depth` of the path.
    fn outer(
        &self,
        depth: usize,
        sent: &Type,
        expected: &Type,
        inner: Refused,
    ) -> Result<(), Refused> {
        if self.path.len() == depth {
            self.refuse(sent, expected)
        } else {
            Err(inner)
        }
    }

    /// `sent` is a type whose values the method reads as `expected` with their value.
    fn check(&mut self, sent: &Type, expected: &Type) -> Result<(), Refused> {
        use TypeInner::*;
        let recursive = matches!(sent.as_ref(), Var(_) | Knot(_))
            || matches!(expected.as_ref(), Var(_) | Knot(_));
        if recursive && !self.assumed.insert((sent.clone(), expected.clone())) {
            return Ok(());
        }
        let (s, e) = (self.trace(sent), self.trace(expected));
        if s == e {
            return Ok(());
        }
        match (s.as_ref(), e.as_ref()) {
            (_, Reserved) | (Empty, _) | (Nat, Int) => Ok(()),
            // No value: the method reads null, as the caller meant. So for an `opt` of nothing
            // (`opt null`, `opt reserved`, `opt empty`: a lazy encoding of "none"), which can
            // carry no value the method could mean.
            (Null | Reserved, Opt(_)) => Ok(()),
            (Opt(s1), Opt(_)) if matches!(self.trace(s1).as_ref(), Null | Reserved | Empty) => {
                Ok(())
            }
            // A refusal right inside the `opt` names the `opt` types, as the field declares them.
            (Opt(s1), Opt(e1)) => {
                let depth = self.path.len();
                self.check(s1, e1)
                    .or_else(|inner| self.outer(depth, &s, &e, inner))
            }
            (_, Opt(e1)) => {
                // A bare value where an `opt` is expected is that value, unless the `opt` holds
                // another `opt`, `null` or `reserved` (Candid then reads null).
                if matches!(self.trace(e1).as_ref(), Null | Reserved | Opt(_)) {
                    self.refuse(&s, &e)
                } else {
                    let depth = self.path.len();
                    self.check(&s, e1)
                        .or_else(|inner| self.outer(depth, &s, &e, inner))
                }
            }
            (Vec(s1), Vec(e1)) => {
                let depth = self.path.len();
                self.path.push("an element".to_owned());
                self.check(s1, e1).or_else(|inner| {
                    // Elements of another primitive type: told as the vectors' types.
                    if self.path.len() == depth + 1 {
                        self.path.pop();
                        self.refuse(&s, &e)
                    } else {
                        Err(inner)
                    }
                })?;
                self.path.truncate(depth);
                Ok(())
            }
            (Record(sent_fields), Record(expected_fields)) => {
                for Field { id, ty } in expected_fields {
                    match field(sent_fields, id) {
                        Some(sent_ty) => {
                            self.path.push(format!("field {id}"));
                            self.check(sent_ty, ty)?;
                            self.path.pop();
                        }
                        None if matches!(self.trace(ty).as_ref(), Null | Reserved | Opt(_)) => {}
                        None => {
                            self.path.push(format!("field {id}"));
                            return Err(("nothing".to_owned(), describe(self.env, ty)));
                        }
                    }
                }
                Ok(())
            }
            (Variant(sent_fields), Variant(expected_fields)) => {
                for Field { id, ty } in sent_fields {
                    let Some(expected_ty) = field(expected_fields, id) else {
                        return Err((format!("variant case {id}"), describe(self.env, &e)));
                    };
                    self.path
                        .push(format!("variant {}", name_of(expected_fields, id)));
                    self.check(ty, expected_ty)?;
                    self.path.pop();
                }
                Ok(())
            }
            (Func(_), Func(_)) | (Service(_), Service(_)) => {
                let mut gamma = HashSet::new();
                subtype_with_config(OptReport::Error, &mut gamma, self.env, &s, &e)
                    .or_else(|_| self.refuse(&s, &e))
            }
            _ => self.refuse(&s, &e),
        }
    }
}

/// The type of the field labelled `id` in `fields`.
fn field<'f>(fields: &'f [Field], id: &Label) -> Option<&'f Type> {
    fields.iter().find(|f| *f.id == *id).map(|f| &f.ty)
}

/// The expected type's name for a label (the wire carries only its hash).
fn name_of(fields: &[Field], id: &Label) -> String {
    fields
        .iter()
        .find(|f| *f.id == *id)
        .map_or_else(|| id.to_string(), |f| f.id.to_string())
}

/// A type as text for a refusal: primitives by name, `opt` and `vec` with what they hold, a
/// record or variant by its constructor (the wire names fields by hash only).
fn describe(env: &TypeEnv, t: &Type) -> String {
    use TypeInner::*;
    let t = env.trace_type(t).unwrap_or_else(|_| t.clone());
    match t.as_ref() {
        Opt(inner) => format!("opt {}", describe(env, inner)),
        Vec(_) if t.is_blob(env) => "blob".to_owned(),
        Vec(inner) => format!("vec {}", describe(env, inner)),
        Record(_) => "record {...}".to_owned(),
        Variant(_) => "variant {...}".to_owned(),
        Func(_) => "func".to_owned(),
        Service(_) => "service".to_owned(),
        _ => t.to_string(),
    }
}

#[cfg(test)]
mod tests;
