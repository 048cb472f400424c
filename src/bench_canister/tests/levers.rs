//! The settings of a lever's build (`src/levers.rs`, compiled into the canister only with the
//! feature `levers`), natively.

#[path = "../src/levers.rs"]
mod levers;

use bench_api::schema::PRAGMAS;
use levers::{count_or, pragmas_with};

#[test]
fn pragmas_with_replaces_only_what_it_names() {
    assert_eq!(pragmas_with([None; 6]), PRAGMAS);
    let lever = pragmas_with([Some("WAL"), None, Some("16384"), None, None, Some("-2000")]);
    assert_eq!(
        lever,
        [
            ("journal_mode", "WAL"),
            ("synchronous", "NORMAL"),
            ("page_size", "16384"),
            ("locking_mode", "EXCLUSIVE"),
            ("temp_store", "MEMORY"),
            ("cache_size", "-2000"),
        ]
    );
}

#[test]
fn count_or_reads_decimal_counts() {
    assert_eq!(count_or(None, 64), 64);
    assert_eq!(count_or(Some("16"), 64), 16);
    assert_eq!(count_or(Some("0"), 64), 0);
    for bad in ["16 ", "", "-1", "0x10"] {
        assert!(
            std::panic::catch_unwind(|| count_or(Some(bad), 64)).is_err(),
            "{bad:?}"
        );
    }
}
