use candid::types::Label;
use candid::types::value::{IDLArgs, IDLField, IDLValue, VariantValue};
use proptest::prelude::*;

use super::*;
use batch_types::declare::Blob;
use batch_types::{BatchKey, InitArgs, SqlStatement};

crate::writes! {
    /// One write per declared parameter type, nullable and not.
    pub enum Probe {
        /// Every kind, nullable.
        loose = "INSERT INTO t (a, b, c, d) VALUES (?1, ?2, ?3, ?4)" {
            count: Option<i64>, ratio: Option<f64>, label: Option<String> [max 64], data: Option<Blob> [max 64]
        },
        /// Every kind, not nullable.
        strict = "INSERT INTO t (a, b, c, d) VALUES (?1, ?2, ?3, ?4)" {
            count: i64, ratio: f64, label: String [max 64], data: Blob [max 64]
        },
    }
}

fn bytes(text: &str) -> Vec<u8> {
    candid_parser::parse_idl_args(text)
        .expect("Candid text")
        .to_bytes()
        .expect("encodes")
}

fn mismatch(text: &str, names: &[&str]) -> ArgumentError {
    decode::<(Vec<SqlStatement>, Option<BatchKey>)>(&bytes(text), names)
        .map(|_| ())
        .expect_err(text)
}

const ID: &str = "blob \"\\00\\01\\02\\03\\04\\05\\06\\07\\08\\09\\0a\\0b\\0c\\0d\\0e\\0f\"";

/// The key of a keyed batch, of another type than `nat64` or with its id missing or of
/// another type: refused, naming the argument, the field and the type sent (Candid alone reads
/// the whole key as null, and the batch would run unkeyed).
#[test]
fn a_mistyped_batch_key_is_refused_naming_the_field_and_the_type_sent() {
    let names = ["statements", "key"];
    for (sent, type_sent) in [
        ("5 : nat", "nat"),
        ("5 : int", "int"),
        ("5 : nat32", "nat32"),
        ("5 : int64", "int64"),
        ("\"5\"", "text"),
    ] {
        let text = format!("(vec {{}}, opt record {{ created_at_time = {sent}; id = {ID} }})");
        assert_eq!(
            mismatch(&text, &names),
            ArgumentError::Mismatch {
                argument: "key".into(),
                path: vec!["field created_at_time".into()],
                sent: type_sent.into(),
                expected: "nat64".into(),
            },
            "{text}"
        );
    }
    let text = "(vec {}, opt record { created_at_time = 5 : nat64; id = \"0123456789abcdef\" })";
    assert_eq!(
        mismatch(text, &names),
        ArgumentError::Mismatch {
            argument: "key".into(),
            path: vec!["field id".into()],
            sent: "text".into(),
            expected: "blob".into(),
        }
    );
    let text = "(vec {}, opt record { created_at_time = 5 : nat64 })";
    assert_eq!(
        mismatch(text, &names),
        ArgumentError::Mismatch {
            argument: "key".into(),
            path: vec!["field id".into()],
            sent: "nothing".into(),
            expected: "blob".into(),
        }
    );
    // Its text says what happened and what the method takes.
    assert_eq!(
        mismatch(
            "(vec {}, opt record { created_at_time = 5 : nat; id = blob \"\" })",
            &names
        )
        .to_string(),
        "argument key, field created_at_time: nat sent where nat64 is expected (a value of \
         another type is refused, never read as null)"
    );
}

/// What a client may mean by no key decodes as no key: the argument left out, `null`, or
/// `opt` without a value; the right key decodes as itself, bare or in its `opt`.
#[test]
fn a_key_left_out_or_null_is_none_and_a_well_typed_key_is_itself() {
    let names = ["statements", "key"];
    let decode = |text: &str| {
        decode::<(Vec<SqlStatement>, Option<BatchKey>)>(&bytes(text), &names)
            .expect(text)
            .1
    };
    assert_eq!(decode("(vec {})"), None);
    assert_eq!(decode("(vec {}, null)"), None);
    assert_eq!(decode("(vec {}, null : opt record {})"), None);
    // An `opt` of nothing carries no value: `None::<()>` as a lazy client encodes it.
    assert_eq!(decode("(vec {}, opt null)"), None);
    assert_eq!(decode("(vec {}, null : opt null)"), None);
    assert_eq!(decode("(vec {}, opt (null : reserved))"), None);
    let lazy = candid::encode_args((Vec::<SqlStatement>::new(), None::<()>)).unwrap();
    assert_eq!(
        super::decode::<(Vec<SqlStatement>, Option<BatchKey>)>(&lazy, &names)
            .unwrap()
            .1,
        None
    );
    // But a null of an `opt` of another type is refused: the client's next key would be lost.
    #[derive(candid::CandidType)]
    struct NatKey {
        created_at_time: candid::Nat,
        id: Vec<u8>,
    }
    let mistyped_none = candid::encode_args((Vec::<SqlStatement>::new(), None::<NatKey>)).unwrap();
    assert!(matches!(
        super::decode::<(Vec<SqlStatement>, Option<BatchKey>)>(&mistyped_none, &names),
        Err(ArgumentError::Mismatch { .. })
    ));
    let key = Some(BatchKey {
        created_at_time: 5,
        id: std::array::from_fn(|i| i as u8),
    });
    let text = format!("(vec {{}}, opt record {{ created_at_time = 5 : nat64; id = {ID} }})");
    assert_eq!(decode(&text), key);
    let bare = format!("(vec {{}}, record {{ created_at_time = 5 : nat64; id = {ID} }})");
    assert_eq!(decode(&bare), key);
    // Extra fields and extra arguments are ignored, as Candid's subtyping says.
    let extra = format!(
        "(vec {{}}, opt record {{ created_at_time = 5 : nat64; id = {ID}; note = \"x\" }}, 7 : nat)"
    );
    assert_eq!(decode(&extra), key);
}

/// A declared parameter sent as another type (`opt nat` for `opt int64`, a text for a
/// nullable integer): refused naming the write and the parameter; Candid alone would store
/// `NULL` and answer `Committed`.
#[test]
fn a_mistyped_declared_parameter_is_refused_naming_it() {
    let names = ["ops"];
    for (due, sent) in [
        ("opt (5 : nat)", "opt nat"),
        ("opt (5 : int)", "opt int"),
        ("\"5\"", "text"),
        ("opt \"5\"", "opt text"),
        ("5 : nat64", "nat64"),
    ] {
        let text = format!(
            "(vec {{ variant {{ loose = record {{ count = {due}; ratio = null; label = null; data = null }} }} }})"
        );
        let refused = decode::<(Vec<Probe>,)>(&bytes(&text), &names).expect_err(&text);
        assert_eq!(
            refused,
            ArgumentError::Mismatch {
                argument: "ops".into(),
                path: vec![
                    "an element".into(),
                    "variant loose".into(),
                    "field count".into()
                ],
                sent: sent.into(),
                expected: "opt int64".into(),
            },
            "{text}"
        );
    }
}

/// A type table accepted once is remembered: the same table with other values is checked by
/// comparing bytes, and a different table is checked again.
#[test]
fn an_accepted_table_is_remembered_and_another_is_checked_again() {
    let names = ["ops"];
    let good = |n: i64| {
        bytes(&format!(
            "(vec {{ variant {{ strict = record {{ count = {n} : int64; ratio = 1.5 : float64; label = \"t\"; data = blob \"b\" }} }} }})"
        ))
    };
    assert!(decode::<(Vec<Probe>,)>(&good(1), &names).is_ok());
    assert!(decode::<(Vec<Probe>,)>(&good(2), &names).is_ok());
    let id = TypeId::of::<(Vec<Probe>,)>();
    let held = || ACCEPTED.with_borrow(|a| a.iter().filter(|(of, _)| *of == id).count());
    assert_eq!(held(), 1);
    let bad = bytes(
        "(vec { variant { strict = record { count = 1 : nat; ratio = 1.5 : float64; label = \"t\"; data = blob \"b\" } } })",
    );
    assert!(decode::<(Vec<Probe>,)>(&bad, &names).is_err());
    assert_eq!(held(), 1);
    // Other accepted tables (an `opt` bare, or not), up to the bound, the oldest forgotten.
    for n in 0..REMEMBERED_TABLES + 2 {
        let text = format!(
            "(vec {{ variant {{ loose = record {{ count = {n} : int64; ratio = null; label = null; data = null; extra{n} = {n} : nat }} }} }})"
        );
        assert!(decode::<(Vec<Probe>,)>(&bytes(&text), &names).is_ok());
    }
    assert_eq!(held(), REMEMBERED_TABLES);
    assert!(
        !remembered::<(Vec<Probe>,)>(&good(1)),
        "the oldest is forgotten"
    );
}

/// A type of Candid other than the parameter's, to send in its place.
fn wrong_type_value() -> BoxedStrategy<IDLValue> {
    prop_oneof![
        any::<u64>().prop_map(|n| IDLValue::Nat(n.into())),
        any::<i64>().prop_map(|n| IDLValue::Int(n.into())),
        any::<u64>().prop_map(IDLValue::Nat64),
        any::<i32>().prop_map(IDLValue::Int32),
        any::<u8>().prop_map(IDLValue::Nat8),
        any::<f32>().prop_map(IDLValue::Float32),
        any::<bool>().prop_map(IDLValue::Bool),
        Just(IDLValue::Record(vec![])),
        Just(IDLValue::Vec(vec![IDLValue::Text("x".into())])),
    ]
    .boxed()
}

/// A value of each kind, as its exact Candid type.
#[derive(Debug, Clone, PartialEq)]
enum Sent {
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Sent {
    fn value(&self) -> IDLValue {
        match self {
            Sent::Int(n) => IDLValue::Int64(*n),
            Sent::Real(x) => IDLValue::Float64(*x),
            Sent::Text(t) => IDLValue::Text(t.clone()),
            Sent::Blob(b) => IDLValue::Blob(b.clone()),
        }
    }
}

fn sent_of(kind: usize) -> BoxedStrategy<Sent> {
    match kind {
        0 => any::<i64>().prop_map(Sent::Int).boxed(),
        1 => any::<f64>()
            .prop_filter("NaN is not equal to itself", |x| !x.is_nan())
            .prop_map(Sent::Real)
            .boxed(),
        2 => "[a-zé€]{0,8}".prop_map(Sent::Text).boxed(),
        _ => proptest::collection::vec(any::<u8>(), 0..8)
            .prop_map(Sent::Blob)
            .boxed(),
    }
}

/// One parameter as a client may send it: well typed (what the method stores is what was
/// sent: `Some(v)` or `None`) or of another type (`None` here: the method must refuse it).
#[derive(Debug, Clone)]
struct Param {
    value: IDLValue,
    /// What the op must hold, if the parameter is well typed.
    stored: Option<Option<Sent>>,
}

fn param(kind: usize, nullable: bool) -> BoxedStrategy<Param> {
    let well_typed = sent_of(kind);
    let wrong = wrong_type_value();
    if nullable {
        prop_oneof![
            well_typed.clone().prop_map(|v| Param {
                value: IDLValue::Opt(Box::new(v.value())),
                stored: Some(Some(v)),
            }),
            well_typed.prop_map(|v| Param {
                value: v.value(),
                stored: Some(Some(v)),
            }),
            Just(Param {
                value: IDLValue::Null,
                stored: Some(None),
            }),
            wrong.clone().prop_map(|w| Param {
                value: IDLValue::Opt(Box::new(w)),
                stored: None,
            }),
            wrong.prop_map(|w| Param {
                value: w,
                stored: None,
            }),
        ]
        .boxed()
    } else {
        prop_oneof![
            3 => well_typed.prop_map(|v| Param { value: v.value(), stored: Some(Some(v)) }),
            1 => wrong.prop_map(|w| Param { value: w, stored: None }),
        ]
        .boxed()
    }
}

const NAMES: [&str; 4] = ["count", "ratio", "label", "data"];

fn op(nullable: bool) -> impl Strategy<Value = Vec<Param>> {
    (
        param(0, nullable),
        param(1, nullable),
        param(2, nullable),
        param(3, nullable),
    )
        .prop_map(|(a, b, c, d)| vec![a, b, c, d])
}

/// A batch of one op of `write`, as a client's Candid library would encode it from these
/// values (fields in the order of their ids, as Candid requires).
fn encode_batch(write: &str, params: &[Param]) -> Vec<u8> {
    let mut fields: Vec<IDLField> = NAMES
        .iter()
        .zip(params)
        .map(|(name, p)| IDLField {
            id: Label::Named((*name).to_owned()),
            val: p.value.clone(),
        })
        .collect();
    fields.sort_by_key(|f| f.id.get_id());
    let op = IDLValue::Variant(VariantValue(
        Box::new(IDLField {
            id: Label::Named(write.to_owned()),
            val: IDLValue::Record(fields),
        }),
        0,
    ));
    IDLArgs::new(&[IDLValue::Vec(vec![op])])
        .to_bytes()
        .expect("encodes")
}

fn held(op: &Probe) -> Vec<Option<Sent>> {
    match op.clone() {
        Probe::loose {
            count,
            ratio,
            label,
            data,
        } => vec![
            count.map(Sent::Int),
            ratio.map(Sent::Real),
            label.map(Sent::Text),
            data.map(|b| Sent::Blob(b.into_vec())),
        ],
        Probe::strict {
            count,
            ratio,
            label,
            data,
        } => vec![
            Some(Sent::Int(count)),
            Some(Sent::Real(ratio)),
            Some(Sent::Text(label)),
            Some(Sent::Blob(data.into_vec())),
        ],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random ops of every declared parameter type, nullable and not, each parameter well typed
    /// (exact, bare where `opt` is declared, or null) or of another Candid type: a batch with
    /// any ill-typed parameter is refused naming one of them; a well-typed one decodes to
    /// exactly what was sent.
    #[test]
    fn a_declared_op_holds_what_was_sent_or_is_refused(
        nullable in any::<bool>(),
        loose in op(true),
        strict in op(false),
    ) {
        let (write, params) = if nullable { ("loose", loose) } else { ("strict", strict) };
        let wire = encode_batch(write, &params);
        let ill_typed: Vec<&str> = NAMES
            .iter()
            .zip(&params)
            .filter(|(_, p)| p.stored.is_none())
            .map(|(name, _)| *name)
            .collect();
        match decode::<(Vec<Probe>,)>(&wire, &["ops"]) {
            Ok((decoded,)) => {
                prop_assert!(ill_typed.is_empty(), "accepted ill-typed {ill_typed:?}");
                let expected: Vec<Option<Sent>> =
                    params.iter().map(|p| p.stored.clone().expect("well typed")).collect();
                prop_assert_eq!(decoded.len(), 1);
                prop_assert_eq!(held(&decoded[0]), expected);
            }
            Err(ArgumentError::Mismatch { argument, path, .. }) => {
                prop_assert_eq!(argument, "ops");
                prop_assert_eq!(path.len(), 3, "{:?}", path);
                prop_assert_eq!(&path[1], &format!("variant {write}"));
                let field = path[2].trim_start_matches("field ");
                prop_assert!(
                    ill_typed.contains(&field),
                    "refused {field}, ill-typed {ill_typed:?}"
                );
            }
            Err(other) => prop_assert!(false, "{other}"),
        }
    }
}

/// The wire types of every argument the library's own methods take pass the check when a
/// client sends them as the Rust types encode them.
#[test]
fn what_candid_encodes_from_the_method_s_own_types_passes() {
    let key = BatchKey {
        created_at_time: 1,
        id: [0; 16],
    };
    let wire = candid::encode_args((Vec::<SqlStatement>::new(), Some(key))).unwrap();
    let (_, decoded) =
        decode::<(Vec<SqlStatement>, Option<BatchKey>)>(&wire, &["statements", "key"]).unwrap();
    assert_eq!(decoded, Some(key));
    let ops = vec![Probe::loose {
        count: Some(-3),
        ratio: None,
        label: Some("é".into()),
        data: None,
    }];
    let wire = candid::encode_args((ops.clone(),)).unwrap();
    assert_eq!(decode::<(Vec<Probe>,)>(&wire, &["ops"]).unwrap(), (ops,));
    let init: Option<InitArgs> = Some(InitArgs {
        flush_size: Some(5),
        ..Default::default()
    });
    let wire = candid::encode_one(&init).unwrap();
    assert!(check::<(Option<InitArgs>,)>(&wire, &["init"]).is_ok());
    let mistyped = bytes("(opt record { flush_size = opt (500 : nat) })");
    assert_eq!(
        check::<(Option<InitArgs>,)>(&mistyped, &["init"]),
        Err(ArgumentError::Mismatch {
            argument: "init".into(),
            path: vec!["field flush_size".into()],
            sent: "opt nat".into(),
            expected: "opt nat64".into(),
        })
    );
    assert!(decode::<()>(&[], &[]).is_ok());
}

/// A key whose id has another length than 16 is refused when the arguments are decoded,
/// naming the id's length, inside an `opt` too (never read as `null`, which would run a keyed
/// batch unkeyed), and the refusal's text stays short however large the argument (Candid's own
/// text holds the whole argument in hexadecimal).
#[test]
fn a_key_id_of_another_length_is_refused_naming_it_in_a_short_text() {
    #[derive(candid::CandidType)]
    struct AnyKey {
        created_at_time: u64,
        id: Vec<u8>,
    }
    let statements = vec![
        SqlStatement {
            sql: "x".repeat(100_000),
            params: vec![],
        };
        10
    ];
    for len in [0, 15, 17, 1_000] {
        let key = AnyKey {
            created_at_time: 1,
            id: vec![7; len],
        };
        let wire = candid::encode_args((&statements, Some(&key))).unwrap();
        assert!(wire.len() > 1_000_000);
        let refused =
            decode::<(Vec<SqlStatement>, Option<BatchKey>)>(&wire, &["statements", "key"])
                .unwrap_err();
        assert_eq!(
            refused,
            ArgumentError::Undecodable(format!(
                "Deserialize error: the batch key's id has {len} bytes; it must have 16"
            ))
        );
        let wire = candid::encode_args((&key, Vec::<Probe>::new())).unwrap();
        assert!(matches!(
            decode::<(BatchKey, Vec<Probe>)>(&wire, &["key", "ops"]),
            Err(ArgumentError::Undecodable(text)) if text.ends_with("must have 16")
        ));
    }
    // Text that is not UTF-8, in a large argument: a short refusal too.
    let mut wire = candid::encode_args((&statements, None::<BatchKey>)).unwrap();
    let at = wire.windows(3).position(|w| w == b"xxx").unwrap();
    wire[at] = 0xff;
    let refused =
        decode::<(Vec<SqlStatement>, Option<BatchKey>)>(&wire, &["statements", "key"]).unwrap_err();
    assert!(
        matches!(&refused, ArgumentError::Undecodable(text) if text.len() <= MAX_UNDECODABLE_BYTES),
        "{refused}"
    );
}
