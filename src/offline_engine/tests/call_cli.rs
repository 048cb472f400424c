//! `offline-engine call` on the project's real canister (built by `scripts/build.sh`; a missing
//! wasm fails the test): Candid text in, the reply decoded by the wasm's `candid:service` out,
//! hex behind flags.

use std::path::PathBuf;
use std::process::Command;

fn wasm() -> PathBuf {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/canister/bench_canister.wasm");
    assert!(
        path.is_file(),
        "{}: build it with scripts/build.sh",
        path.display()
    );
    path
}

fn call(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_offline-engine"))
        .arg("call")
        .arg(wasm())
        .args(args)
        .output()
        .expect("offline-engine runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn candid_text_in_decoded_reply_out() {
    let (ok, out, err) = call(&[
        "create_user",
        r#"("alice", "alice@example.com")"#,
        "--init",
        "(opt record { flush_size = opt 1000; write_access = opt variant { Open } })",
    ]);
    assert!(ok, "{out}\n{err}");
    // The reply (Candid text over several lines) up to the cost line.
    let reply = &out[out.find("reply: ").expect(&out)..out.find("update: ").expect(&out)];
    // The Outcome variant by its field names, as the .did declares it: the first user is row 1.
    assert!(reply.contains("Committed"), "{reply}");
    assert!(reply.contains("last_insert_rowid = 1"), "{reply}");
    assert!(reply.contains("rows_changed = 1"), "{reply}");
    assert!(out.contains("update: "), "{out}");
}

#[test]
fn queries_run_as_queries_and_hex_stays_available() {
    let (ok, out, err) = call(&["counts"]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("query: "),
        "declared `query` in the .did: {out}"
    );
    assert!(out.contains("users = 0"), "{out}");
    let (ok, out, err) = call(&["counts", "--arg-hex", "4449444c0000", "--reply-hex"]);
    assert!(ok, "{out}\n{err}");
    let reply = out.lines().find(|l| l.starts_with("reply: ")).expect(&out);
    assert!(
        reply.trim_start_matches("reply: ").starts_with("4449444c"),
        "{reply}"
    );
}

#[test]
fn a_mistyped_argument_is_refused_with_its_cause() {
    let (ok, out, err) = call(&["create_user", "(1, 2)"]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("does not fit `create_user`'s arguments"),
        "{err}"
    );
    let (ok, _, err) = call(&["no_such_method"]);
    assert!(!ok);
    assert!(err.contains("has no method `no_such_method`"), "{err}");
}

/// The metering profile: `--metering` (or `OFFLINE_ENGINE_METERING`) chooses it, and the cost
/// lines show the pages the message touched under it.
#[test]
fn the_metering_profile_is_an_option_and_the_pages_are_printed() {
    let line = |out: &str, prefix: &str| -> String {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in {out}"))
            .to_string()
    };
    let args = ["create_user", r#"("alice", "alice@example.com")"#];
    let (ok, old, err) = call(&args);
    assert!(ok, "{old}\n{err}");
    assert!(line(&old, "metering: ").starts_with("metering: pocketic-13 ("));
    assert!(line(&old, "heap: ").starts_with("heap: accessed 0 Wasm pages [-]"));
    let mut with = vec!["--metering", "ic-dmt-0441fbd7"];
    with.extend(args);
    let (ok, new, err) = call(&with);
    assert!(ok, "{new}\n{err}");
    assert!(line(&new, "metering: ").starts_with("metering: ic-dmt-0441fbd7 ("));
    let heap = line(&new, "heap: ");
    assert!(!heap.starts_with("heap: accessed 0 "), "{heap}");
    // The page charges are 80,000 per tracker event; the old rules' are 1,000 per page.
    let charged = |out: &str| -> u64 {
        line(out, "page instructions: ")
            .trim_start_matches("page instructions: ")
            .parse()
            .unwrap()
    };
    assert_eq!(charged(&new) % 80_000, 0, "{new}");
    assert_eq!(charged(&old) % 1_000, 0, "{old}");
    assert!(charged(&new) > charged(&old));
    let out = Command::new(env!("CARGO_BIN_EXE_offline-engine"))
        .env("OFFLINE_ENGINE_METERING", "pocketic")
        .arg("call")
        .arg(wasm())
        .args(args)
        .output()
        .expect("offline-engine runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "unknown metering profile `pocketic`; the profiles are: pocketic-13, ic-dmt-0441fbd7"
        ),
        "{err}"
    );
}
