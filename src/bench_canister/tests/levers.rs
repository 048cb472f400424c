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

/// What `bench-suite levers` compares is the build alone: a "lever" that is the reference's own
/// wasm, measured after the reference with the same engine, touches the same pages and costs
/// the same under both profiles (each build's canisters are its own: nothing carries over).
#[test]
fn a_build_the_same_as_the_reference_measures_the_same() {
    use bench_suite::engine_runs::{self, Fixture};
    use bench_suite::fees::IC_2025;
    use bench_suite::levers::{Build, render};
    use bench_suite::profiles::{LEAD, page_regions};
    use bench_suite::progress::Progress;

    let reference = bench_suite::client::default_wasm_path();
    let dir = std::env::temp_dir().join(format!("levers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let same = dir.join("same.wasm");
    std::fs::copy(&reference, &same).unwrap();
    let engine = engine_runs::engine_with(LEAD).unwrap();
    let builds: Vec<Build> = [("reference", &reference), ("same", &same)]
        .into_iter()
        .map(|(name, path)| {
            let program = engine_runs::load(&engine, path, "scripts/build.sh").unwrap();
            let workloads = page_regions(
                path,
                &engine,
                &program,
                Fixture::Small,
                &IC_2025,
                &mut Progress::quiet(),
            )
            .unwrap();
            Build {
                name: name.to_string(),
                sha256: program.sha256_hex(),
                workloads,
            }
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(builds[0].sha256, builds[1].sha256);
    assert_eq!(builds[0].workloads, builds[1].workloads);
    assert_eq!(builds[0].workloads.len(), 3);
    let table = render(&builds, Fixture::Small, "a", "b").unwrap();
    let same_rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| `same`"))
        .collect();
    assert_eq!(same_rows.len(), 3, "{table}");
    for row in same_rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // build, cycles (tracker), change, cycles (PocketIC 13), change, pages, pages
        assert_eq!((cells[3], cells[5]), ("0.0 %", "0.0 %"), "{row}");
    }
}
