//! Every named type of the committed `bench_canister.did` is exactly the Rust type of this
//! crate with that name: the canister, its tests and the suite all use these types, so they all
//! speak the committed interface. (The canister's own test checks its methods against the
//! `.did`: `bench_canister/tests/on_engine.rs`.)

use batch_types::declare;
use bench_api::*;
use candid::CandidType;
use candid::types::subtype::{Gamma, equal};
use candid_parser::utils::CandidSource;

fn check<T: CandidType>(name: &str, checked: &mut Vec<String>) {
    let (env, _) = CandidSource::Text(CANDID).load().expect("the .did parses");
    let in_did = env
        .find_type(name)
        .unwrap_or_else(|_| panic!("the .did has no type {name}"))
        .clone();
    equal(&mut Gamma::new(), &env, &T::ty(), &in_did)
        .unwrap_or_else(|e| panic!("{name}: the Rust type differs from the .did: {e}"));
    checked.push(name.to_owned());
}

#[test]
fn every_did_type_is_the_rust_type() {
    let mut checked = Vec::new();
    check::<InitArgs>("InitArgs", &mut checked);
    check::<Settings>("Settings", &mut checked);
    check::<WriteAccess>("WriteAccess", &mut checked);
    check::<Ticket>("Ticket", &mut checked);
    check::<OpError>("OpError", &mut checked);
    check::<Outcome>("Outcome", &mut checked);
    check::<FlushSummary>("FlushSummary", &mut checked);
    check::<WriteError>("WriteError", &mut checked);
    check::<TicketStatus>("TicketStatus", &mut checked);
    check::<Stats>("Stats", &mut checked);
    check::<Counts>("Counts", &mut checked);
    check::<UserOrder>("UserOrder", &mut checked);
    check::<User>("User", &mut checked);
    check::<Order>("Order", &mut checked);
    check::<OrdersResult>("OrdersResult", &mut checked);
    check::<SqlParam>("SqlParam", &mut checked);
    check::<SqlStatement>("SqlStatement", &mut checked);
    check::<UserOrderOp>("UserOrderOp", &mut checked);
    check::<WriteResult>("WriteResult", &mut checked);
    check::<SubmitResult>("SubmitResult", &mut checked);
    check::<FlushResult>("FlushResult", &mut checked);
    check::<BatchResult>("BatchResult", &mut checked);
    check::<BatchKey>("BatchKey", &mut checked);
    check::<AdminResult>("AdminResult", &mut checked);
    check::<PackedResult>("PackedResult", &mut checked);
    check::<QueryError>("QueryError", &mut checked);
    check::<CountsResult>("CountsResult", &mut checked);
    check::<UserOrdersResult>("UserOrdersResult", &mut checked);
    check::<UsersResult>("UsersResult", &mut checked);
    // The declared writes' client batches (`client_batches!`).
    check::<writes::UserOrderWrite>("UserOrderWrite", &mut checked);
    check::<declare::Access>("Access", &mut checked);
    check::<declare::BatchRefusal>("BatchRefusal", &mut checked);
    check::<declare::DeclarationView>("DeclarationView", &mut checked);
    check::<declare::InvalidParam>("InvalidParam", &mut checked);
    check::<declare::PackedWritesResult>("PackedWritesResult", &mut checked);
    check::<declare::ParamKind>("ParamKind", &mut checked);
    check::<declare::ParamView>("ParamView", &mut checked);
    check::<declare::WriteView>("WriteView", &mut checked);
    check::<declare::WritesReply>("WritesReply", &mut checked);
    check::<declare::WritesResult>("WritesResult", &mut checked);
    // No type of the .did is left unchecked.
    let (env, _) = CandidSource::Text(CANDID).load().unwrap();
    let mut in_did: Vec<String> = env.0.keys().cloned().collect();
    in_did.sort();
    checked.sort();
    assert_eq!(in_did, checked);
}

/// The method table and the `.did` declare the same methods, both directions, and a method is
/// a query in one exactly when it is in the other; no method is listed twice.
#[test]
fn the_method_table_is_the_did_service() {
    let prog: candid_parser::IDLProg = CANDID.parse().expect("the .did parses");
    let actor = prog.actor.expect("the .did has a service");
    let service = match actor.typ {
        candid_parser::syntax::IDLType::ClassT(_, service) => *service,
        other => other,
    };
    let candid_parser::syntax::IDLType::ServT(methods) = service else {
        panic!("not a service: {service:?}")
    };
    let mut in_did: Vec<(String, bool)> = methods
        .into_iter()
        .map(|m| {
            let query = matches!(&m.typ, candid_parser::syntax::IDLType::FuncT(f)
                if f.modes.iter().any(|mode| format!("{mode:?}").contains("Query")));
            (m.id, query)
        })
        .collect();
    let mut in_table: Vec<(String, bool)> = METHODS
        .iter()
        .map(|(name, class)| (name.to_string(), *class == MethodClass::Query))
        .collect();
    in_did.sort();
    in_table.sort();
    assert_eq!(in_table, in_did);
    let mut names: Vec<&str> = METHODS.iter().map(|(name, _)| *name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), METHODS.len(), "a method is listed twice");
}

#[test]
fn canbench_and_icp_install_with_default_settings() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let canbench = std::fs::read_to_string(root.join("canbench.yml")).unwrap();
    let hex = canbench
        .lines()
        .find_map(|l| l.trim().strip_prefix("hex: "))
        .expect("canbench.yml sets init_args.hex");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let args: Option<InitArgs> = candid::decode_one(&bytes).expect("a valid install argument");
    assert_eq!(args, Some(InitArgs::default()));
    let icp = std::fs::read_to_string(root.join("icp.yaml")).unwrap();
    assert!(icp.contains("init_args: \"(opt record {})\""));
}
