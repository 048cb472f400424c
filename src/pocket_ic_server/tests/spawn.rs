//! The `pocket-ic` client starts the server binary itself (`POCKET_IC_BIN` or
//! `with_server_binary`): `--version` passes its check, the port file is written, and later
//! instances of the same test process reuse the same server. One test, so that setting the
//! environment races with no other thread.

use std::path::PathBuf;

use pocket_ic::PocketIcBuilder;

#[test]
fn the_client_checks_the_version_starts_the_server_and_reuses_it() {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_offline-pocket-ic"));
    let out = std::process::Command::new(&binary)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "pocket-ic-server 13.0.0\n"
    );

    // SAFETY: this is the only test of this process and no other thread runs yet. The
    // server's output is discarded so that the test process does not wait for its TTL.
    unsafe { std::env::set_var("POCKET_IC_MUTE_SERVER", "1") };
    let first = PocketIcBuilder::new()
        .with_server_binary(binary.clone())
        .with_application_subnet()
        .build();
    let port_file = std::env::temp_dir().join(format!("pocket_ic_{}.port", std::process::id()));
    let port = std::fs::read_to_string(&port_file).expect("the server wrote its port file");
    assert!(port.ends_with('\n'));
    let url = first.get_server_url();
    assert_eq!(url.port(), port.trim_end().parse().ok());
    let second = PocketIcBuilder::new()
        .with_server_binary(binary)
        .with_benchmarking_application_subnet()
        .build();
    assert_eq!(second.get_server_url(), url);
    assert_ne!(second.instance_id(), first.instance_id());
    assert_eq!(second.topology().get_benchmarking_app_subnets().len(), 1);
}
