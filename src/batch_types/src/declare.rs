//! One declaration of a canister's writes, from which everything else is derived.
//!
//! A canister author declares each write once with [`writes!`](crate::writes): its name, its
//! SQL, its typed parameters (integer, real, text, blob; nullable as `Option<_>`; texts and
//! blobs with a size limit) and who may call it. The macro gives a Rust enum with one variant
//! per write and one named field per parameter, which is also its Candid type (what
//! `icp canister call` users see is `variant { add_todo : record { title : text; ... } }`),
//! and a [`Writes`] implementation: the [`Declaration`] (the table every check and the packed
//! format read), each op's packed encoding, and its SQL parameters.
//!
//! The same crate serves the canister (ic-rusqlite-batch derives its batch methods from the
//! declaration) and its clients (the Rust client packs ops with it; the TypeScript client reads
//! the same table from the canister's `batch_declaration` query), so a client and a canister
//! agree on the bytes by construction, and a client built against another declaration is
//! refused by its [`Declaration::digest`], naming both digests, before anything runs.
//!
//! # The digest
//!
//! The first 8 bytes of the SHA-256 of: the text `ic-rusqlite-batch declaration 1\n`, then for
//! each write in order its name, `\0`, its SQL, `\0`, its access (`w` writers, `c`
//! controllers), then for each parameter its name, `\0`, its kind (`i`, `r`, `t`, `b`),
//! `?` if nullable else `!`, its size limit as 4 bytes little-endian (`0xffffffff` when
//! none), and `\n` after each write. Everything a client needs to encode an op, and the SQL it
//! runs, is in it: changing a write's SQL, a parameter's type or order, or the order of the
//! writes changes the digest.

use std::fmt;

use candid::{CandidType, Deserialize};
use serde_bytes::ByteBuf;
use sha2::{Digest as _, Sha256};

use crate::packed;
use crate::{BatchKey, Outcome, SqlParam, WriteError};

/// The SQL type of a declared parameter.
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A 64-bit signed integer (`i64`).
    Integer,
    /// A 64-bit float (`f64`).
    Real,
    /// UTF-8 text (`String`).
    Text,
    /// Bytes (a `Blob`).
    Blob,
}

/// Who may call a declared write.
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Controllers and the writers they register (anyone in `WriteAccess::Open`).
    Writers,
    /// Controllers only.
    Controllers,
}

/// One declared parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamDecl {
    /// Its name (the Candid field's).
    pub name: &'static str,
    /// Its SQL type.
    pub kind: ParamKind,
    /// `NULL` is a value of it (`Option<_>`).
    pub nullable: bool,
    /// The most bytes of a text or blob.
    pub max_bytes: Option<u32>,
}

/// One declared write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteDecl {
    /// Its name (the Candid variant's).
    pub name: &'static str,
    /// Its SQL: one statement whose `?1`, `?2`, ... are the parameters in order.
    pub sql: &'static str,
    /// Who may call it.
    pub access: Access,
    /// Its parameters, in order.
    pub params: &'static [ParamDecl],
}

/// A canister's declared writes and their digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declaration {
    /// The declaration's name (its enum's).
    pub name: &'static str,
    /// The writes, in declared order (a write's index is its place here).
    pub writes: &'static [WriteDecl],
    /// See the [module documentation](self#the-digest).
    pub digest: [u8; 8],
}

/// Why an op's parameters are not what its write declares: the op (its place in the batch),
/// the write and the parameter named.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct InvalidParam {
    /// The op's place in its batch (from 0).
    pub op: u64,
    /// The write's name.
    pub write: String,
    /// The parameter's name (empty when the count is wrong).
    pub param: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for InvalidParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op {} ({}", self.op, self.write)?;
        if !self.param.is_empty() {
            write!(f, ", parameter {}", self.param)?;
        }
        write!(f, "): {}", self.reason)
    }
}

impl Declaration {
    /// The declaration of `writes` named `name`, with its digest.
    pub fn new(name: &'static str, writes: &'static [WriteDecl]) -> Self {
        Declaration {
            name,
            writes,
            digest: digest_of(writes),
        }
    }

    /// Checks the parameters of op `op` (its place in the batch) against write `write`: their
    /// count, each one's type, `NULL` only where nullable (a NaN real binds as `NULL`), and
    /// the size limits. `write` must be an index of [`Self::writes`].
    pub fn check(&self, op: usize, write: usize, params: &[SqlParam]) -> Result<(), InvalidParam> {
        let decl = &self.writes[write];
        let invalid = |param: &str, reason: String| InvalidParam {
            op: op as u64,
            write: decl.name.to_owned(),
            param: param.to_owned(),
            reason,
        };
        if params.len() != decl.params.len() {
            return Err(invalid(
                "",
                format!(
                    "{} parameters; {} declared",
                    params.len(),
                    decl.params.len()
                ),
            ));
        }
        for (param, value) in decl.params.iter().zip(params) {
            let (kind, len) = match value {
                SqlParam::Null => (None, 0),
                SqlParam::Real(x) if x.is_nan() => (None, 0),
                SqlParam::Integer(_) => (Some(ParamKind::Integer), 0),
                SqlParam::Real(_) => (Some(ParamKind::Real), 0),
                SqlParam::Text(t) => (Some(ParamKind::Text), t.len()),
                SqlParam::Blob(b) => (Some(ParamKind::Blob), b.len()),
            };
            match kind {
                None if !param.nullable => {
                    return Err(invalid(
                        param.name,
                        "NULL (or NaN, which binds as NULL); the parameter is not nullable".into(),
                    ));
                }
                Some(kind) if kind != param.kind => {
                    return Err(invalid(
                        param.name,
                        format!("{kind:?}; {:?} declared", param.kind),
                    ));
                }
                _ => {}
            }
            if let Some(max) = param.max_bytes
                && len > max as usize
            {
                return Err(invalid(param.name, format!("{len} bytes; at most {max}")));
            }
        }
        Ok(())
    }

    /// The index of the write named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.writes.iter().position(|w| w.name == name)
    }

    /// The declaration as the canister's `batch_declaration` query answers it.
    pub fn view(&self) -> DeclarationView {
        DeclarationView {
            name: self.name.to_owned(),
            digest: ByteBuf::from(self.digest.to_vec()),
            writes: self
                .writes
                .iter()
                .map(|w| WriteView {
                    name: w.name.to_owned(),
                    sql: w.sql.to_owned(),
                    access: w.access,
                    params: w
                        .params
                        .iter()
                        .map(|p| ParamView {
                            name: p.name.to_owned(),
                            kind: p.kind,
                            nullable: p.nullable,
                            max_bytes: p.max_bytes,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// The digest of `writes` (see the [module documentation](self#the-digest)).
pub fn digest_of(writes: &[WriteDecl]) -> [u8; 8] {
    let mut h = Sha256::new();
    h.update(b"ic-rusqlite-batch declaration 1\n");
    for w in writes {
        h.update(w.name.as_bytes());
        h.update([0]);
        h.update(w.sql.as_bytes());
        h.update([0]);
        h.update(match w.access {
            Access::Writers => b"w",
            Access::Controllers => b"c",
        });
        for p in w.params {
            h.update(p.name.as_bytes());
            h.update([0]);
            h.update(match p.kind {
                ParamKind::Integer => b"i",
                ParamKind::Real => b"r",
                ParamKind::Text => b"t",
                ParamKind::Blob => b"b",
            });
            h.update(if p.nullable { b"?" } else { b"!" });
            h.update(p.max_bytes.unwrap_or(u32::MAX).to_le_bytes());
        }
        h.update(b"\n");
    }
    let full = h.finalize();
    full[..8].try_into().expect("8 of 32 bytes")
}

/// A declaration as Candid carries it (the `batch_declaration` query): what a client needs to
/// pack ops for the canister without code of its own.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct DeclarationView {
    /// The declaration's name.
    pub name: String,
    /// Its digest, which every packed request carries.
    pub digest: ByteBuf,
    /// The writes, in declared order.
    pub writes: Vec<WriteView>,
}

/// One write of a `DeclarationView`.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WriteView {
    /// Its name.
    pub name: String,
    /// Its SQL.
    pub sql: String,
    /// Who may call it.
    pub access: Access,
    /// Its parameters, in order.
    pub params: Vec<ParamView>,
}

/// One parameter of a `WriteView`.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ParamView {
    /// Its name.
    pub name: String,
    /// Its SQL type.
    pub kind: ParamKind,
    /// `NULL` is a value of it.
    pub nullable: bool,
    /// The most bytes of a text or blob.
    pub max_bytes: Option<u32>,
}

/// Why a batch of declared writes was refused whole: nothing of it ran.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum BatchRefusal {
    /// The caller may not call the method, or a write of the batch is for controllers only.
    // Its own case, as in `WriteError`, so that the canister's precomputed refusal
    // `variant { Err = variant { NotAuthorized } }` reads as this one.
    NotAuthorized,
    /// Refused as every write method refuses (key outside its window, key reused for other
    /// ops, full deduplication store, the transaction could not begin, ...).
    Refused(WriteError),
    /// An op's parameters are not what its write declares.
    InvalidParam(InvalidParam),
    /// The request was packed for another declaration of the canister's writes (the canister
    /// was upgraded and a write changed, or the client is for another canister): both digests.
    DeclarationMismatch {
        /// The digest of the canister's declaration.
        canister: ByteBuf,
        /// The digest the request carries.
        request: ByteBuf,
    },
    /// The bytes are not a request of the generic packed format: where and what.
    Malformed {
        /// Byte offset in the request.
        offset: u64,
        /// What was wrong there.
        what: String,
    },
}

impl fmt::Display for BatchRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchRefusal::NotAuthorized => write!(f, "NotAuthorized"),
            BatchRefusal::Refused(e) => write!(f, "Refused: {e}"),
            BatchRefusal::InvalidParam(e) => write!(f, "InvalidParam: {e}"),
            BatchRefusal::DeclarationMismatch { canister, request } => write!(
                f,
                "DeclarationMismatch: the canister's writes are declaration {}, the request was \
                 packed for declaration {}",
                hex(canister),
                hex(request)
            ),
            BatchRefusal::Malformed { offset, what } => {
                write!(f, "Malformed: byte {offset}: {what}")
            }
        }
    }
}

impl std::error::Error for BatchRefusal {}

impl From<WriteError> for BatchRefusal {
    /// `NotAuthorized` as [`BatchRefusal::NotAuthorized`], every other error as `Refused`.
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::NotAuthorized => BatchRefusal::NotAuthorized,
            e => BatchRefusal::Refused(e),
        }
    }
}

impl From<InvalidParam> for BatchRefusal {
    fn from(e: InvalidParam) -> Self {
        BatchRefusal::InvalidParam(e)
    }
}

impl From<packed::PackedError> for BatchRefusal {
    fn from(e: packed::PackedError) -> Self {
        BatchRefusal::Malformed {
            offset: e.offset as u64,
            what: e.what,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The outcomes of a batch of declared writes, in Candid.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct WritesReply {
    /// One outcome per op, in order.
    pub outcomes: Vec<Outcome>,
    /// The key was recorded already: nothing ran, these are the outcomes of the first run.
    pub duplicate: bool,
}

crate::named_results! {
    /// The reply of a keyed batch of declared writes in Candid (`execute_writes`).
    WritesResult(WritesReply, BatchRefusal);
    /// The reply of a packed batch of declared writes (`execute_writes_packed`): the
    /// outcomes in the generic packed format.
    PackedWritesResult(ByteBuf, BatchRefusal);
}

/// Bytes, as a blob parameter is declared (`serde_bytes`' `ByteBuf`: Candid `blob`).
pub type Blob = ByteBuf;

/// A value a declared parameter takes: `i64`, `f64`, `String`, [`Blob`], or an `Option` of
/// one of them (nullable).
pub trait Param: Sized {
    /// Its SQL type.
    const KIND: ParamKind;
    /// `NULL` is a value of it.
    const NULLABLE: bool;
    /// Appends its packed encoding.
    fn put(&self, out: &mut Vec<u8>);
    /// The bytes [`Self::put`] appends.
    fn packed_len(&self) -> usize;
    /// The value bound to its SQL parameter.
    fn into_sql(self) -> SqlParam;
}

/// A non-null parameter value (the types [`Param`] takes besides `Option`).
pub trait Value: Sized {
    /// Its SQL type.
    const KIND: ParamKind;
    /// Appends its packed encoding.
    fn put(&self, out: &mut Vec<u8>);
    /// The bytes [`Self::put`] appends.
    fn packed_len(&self) -> usize;
    /// The value bound to its SQL parameter.
    fn into_sql(self) -> SqlParam;
}

impl Value for i64 {
    const KIND: ParamKind = ParamKind::Integer;
    fn put(&self, out: &mut Vec<u8>) {
        packed::put_sint(out, *self);
    }
    fn packed_len(&self) -> usize {
        packed::sint_len(*self)
    }
    fn into_sql(self) -> SqlParam {
        SqlParam::Integer(self)
    }
}

impl Value for f64 {
    const KIND: ParamKind = ParamKind::Real;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn packed_len(&self) -> usize {
        8
    }
    fn into_sql(self) -> SqlParam {
        SqlParam::Real(self)
    }
}

impl Value for String {
    const KIND: ParamKind = ParamKind::Text;
    fn put(&self, out: &mut Vec<u8>) {
        packed::put_text(out, self);
    }
    fn packed_len(&self) -> usize {
        packed::uint_len(self.len() as u64) + self.len()
    }
    fn into_sql(self) -> SqlParam {
        SqlParam::Text(self)
    }
}

impl Value for Blob {
    const KIND: ParamKind = ParamKind::Blob;
    fn put(&self, out: &mut Vec<u8>) {
        packed::put_bytes(out, self);
    }
    fn packed_len(&self) -> usize {
        packed::uint_len(self.len() as u64) + self.len()
    }
    fn into_sql(self) -> SqlParam {
        SqlParam::Blob(self.into_vec())
    }
}

impl<T: Value> Param for T {
    const KIND: ParamKind = T::KIND;
    const NULLABLE: bool = false;
    fn put(&self, out: &mut Vec<u8>) {
        Value::put(self, out);
    }
    fn packed_len(&self) -> usize {
        Value::packed_len(self)
    }
    fn into_sql(self) -> SqlParam {
        Value::into_sql(self)
    }
}

impl<T: Value> Param for Option<T> {
    const KIND: ParamKind = T::KIND;
    const NULLABLE: bool = true;
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                v.put(out);
            }
        }
    }
    fn packed_len(&self) -> usize {
        1 + self.as_ref().map_or(0, Value::packed_len)
    }
    fn into_sql(self) -> SqlParam {
        self.map_or(SqlParam::Null, Value::into_sql)
    }
}

/// A canister's declared writes: the enum [`writes!`](crate::writes) defines.
pub trait Writes: CandidType + for<'de> Deserialize<'de> + Clone + fmt::Debug {
    /// The declaration (computed once).
    fn declaration() -> &'static Declaration;
    /// This op's write: its index in [`Declaration::writes`].
    fn index(&self) -> usize;
    /// Appends this op's parameters, packed by their declared types.
    fn put_params(&self, out: &mut Vec<u8>);
    /// The bytes of this op's parameters, packed.
    fn params_len(&self) -> usize;
    /// This op's SQL parameters, in order.
    fn into_params(self) -> Vec<SqlParam>;

    /// Appends this op as a packed request carries it: its write's index, then its parameters.
    fn put_op(&self, out: &mut Vec<u8>) {
        packed::put_uint(out, self.index() as u64);
        self.put_params(out);
    }

    /// The bytes [`Self::put_op`] appends.
    fn op_len(&self) -> usize {
        packed::uint_len(self.index() as u64) + self.params_len()
    }
}

/// Packs a request of `ops` under `key` for their declaration ([`crate::packed`]'s format).
pub fn encode_request<W: Writes>(key: &BatchKey, ops: &[W]) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        packed::REQUEST_HEADER_BYTES + ops.iter().map(Writes::op_len).sum::<usize>(),
    );
    packed::request_header(&mut out, W::declaration().digest, key);
    for op in ops {
        op.put_op(&mut out);
    }
    out
}

/// The ops of a batch as the packed format encodes them (without the header): what the
/// canister digests to tell a retry from another batch under the same key, whichever of its
/// methods carried them.
pub fn packed_ops<W: Writes>(ops: &[W]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ops.iter().map(Writes::op_len).sum::<usize>());
    for op in ops {
        op.put_op(&mut out);
    }
    out
}

/// Declares a canister's writes once: an enum with a variant per write and a named field per
/// parameter (its Candid type), and its [`Writes`] implementation.
///
/// ```
/// batch_types::writes! {
///     /// The writes of a todo store.
///     pub enum TodoWrite {
///         /// Adds a todo; NULL `due` for none.
///         add_todo = "INSERT INTO todos (title, due) VALUES (?1, ?2)" {
///             title: String [max 200],
///             due: Option<i64>,
///         },
///         /// Marks a todo done.
///         complete = "UPDATE todos SET done = 1 WHERE id = ?1" { id: i64 },
///         /// Deletes every done todo: controllers only.
///         purge_done (controllers) = "DELETE FROM todos WHERE done = 1" {},
///     }
/// }
/// use batch_types::declare::Writes;
/// let op = TodoWrite::complete { id: 7 };
/// assert_eq!(op.index(), 1);
/// assert_eq!(TodoWrite::declaration().writes[2].name, "purge_done");
/// ```
///
/// A parameter is `name: Type`, `Type` one of `i64`, `f64`, `String`,
/// [`Blob`](crate::declare::Blob) or an `Option` of one (nullable), and a text or blob may
/// have `[max N]` (bytes). A write is `name = "SQL" { params }`, or `name (controllers) = ...`
/// for a write only controllers may call. The crate using it depends on `candid` and `serde`
/// (the derives name them).
#[macro_export]
macro_rules! writes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$wmeta:meta])*
                $write:ident $(($access:ident))? = $sql:literal {
                    $($param:ident : $ty:ty $([max $max:literal])?),* $(,)?
                }
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(::candid::CandidType, ::serde::Deserialize, Clone, Debug, PartialEq)]
        #[allow(non_camel_case_types)]
        $vis enum $name {
            $(
                $(#[$wmeta])*
                $write { $($param: $ty),* }
            ),*
        }

        const _: () = {
            #[allow(non_camel_case_types, dead_code)]
            #[derive(Clone, Copy)]
            enum __Index { $($write),* }

            const __WRITES: &[$crate::declare::WriteDecl] = &[
                $(
                    $crate::declare::WriteDecl {
                        name: ::core::stringify!($write),
                        sql: $sql,
                        access: $crate::__write_access!($($access)?),
                        params: &[
                            $(
                                $crate::declare::ParamDecl {
                                    name: ::core::stringify!($param),
                                    kind: <$ty as $crate::declare::Param>::KIND,
                                    nullable: <$ty as $crate::declare::Param>::NULLABLE,
                                    max_bytes: $crate::__max_bytes!($($max)?),
                                }
                            ),*
                        ],
                    }
                ),*
            ];

            impl $crate::declare::Writes for $name {
                fn declaration() -> &'static $crate::declare::Declaration {
                    static DECLARATION: ::std::sync::OnceLock<$crate::declare::Declaration> =
                        ::std::sync::OnceLock::new();
                    DECLARATION.get_or_init(|| {
                        $crate::declare::Declaration::new(::core::stringify!($name), __WRITES)
                    })
                }

                fn index(&self) -> usize {
                    match self {
                        $(Self::$write { .. } => __Index::$write as usize,)*
                    }
                }

                #[allow(unused_variables)]
                fn put_params(&self, out: &mut ::std::vec::Vec<u8>) {
                    match self {
                        $(Self::$write { $($param),* } => {
                            $($crate::declare::Param::put($param, out);)*
                        })*
                    }
                }

                fn params_len(&self) -> usize {
                    match self {
                        $(Self::$write { $($param),* } => {
                            0 $(+ $crate::declare::Param::packed_len($param))*
                        })*
                    }
                }

                fn into_params(self) -> ::std::vec::Vec<$crate::SqlParam> {
                    match self {
                        $(Self::$write { $($param),* } => {
                            ::std::vec![$($crate::declare::Param::into_sql($param)),*]
                        })*
                    }
                }
            }
        };
    };
}

/// Who may call a declared write: `writes!`'s `(controllers)`, writers by default.
#[doc(hidden)]
#[macro_export]
macro_rules! __write_access {
    () => {
        $crate::declare::Access::Writers
    };
    (writers) => {
        $crate::declare::Access::Writers
    };
    (controllers) => {
        $crate::declare::Access::Controllers
    };
}

/// A declared parameter's size limit: `writes!`'s `[max N]`.
#[doc(hidden)]
#[macro_export]
macro_rules! __max_bytes {
    () => {
        ::core::option::Option::None
    };
    ($max:literal) => {
        ::core::option::Option::Some($max)
    };
}

#[cfg(test)]
mod tests;
