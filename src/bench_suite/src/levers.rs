//! A lever against the reference: the same workloads as [`crate::regions`] (one `create_order`
//! per message, packed batches of 1,000 and 10,000) on builds of the reference canister that
//! differ in one setting (`scripts/levers.sh`: `bench-suite levers`), each figure under both
//! metering profiles.

use std::fmt::Write as _;

use crate::analysis::fmt_u;
use crate::engine_runs::Fixture;
use crate::regions::{RegionPages, WorkloadPages};

/// One build's pages and cycles on each workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Build {
    /// What differs from the reference (`reference` for the reference itself).
    pub name: String,
    /// The sha256 of its wasm, in hex.
    pub sha256: String,
    /// Its workloads, in [`crate::profiles::page_regions`]' order.
    pub workloads: Vec<WorkloadPages>,
}

/// Loads the wasm at `path` into `engine` (the tracker's; `hint` says how to build it) and runs
/// the workloads of where the pages go on it, each on a canister holding `fixture`, under both
/// profiles ([`crate::profiles::page_regions`]): the build `name`.
pub fn measure(
    engine: &offline_engine::Engine,
    name: String,
    path: &std::path::Path,
    fixture: Fixture,
    hint: &str,
    progress: &mut crate::progress::Progress,
) -> anyhow::Result<Build> {
    let program = crate::engine_runs::load(engine, path, hint)?;
    let workloads = crate::profiles::page_regions(
        path,
        engine,
        &program,
        fixture,
        &crate::fees::IC_2025,
        progress,
    )?;
    Ok(Build {
        name,
        sha256: program.sha256_hex(),
        workloads,
    })
}

/// What a canister holds before the workload.
pub(crate) fn fixture_words(fixture: Fixture) -> String {
    let (users, orders) = fixture.rows();
    format!(
        "{} users and {} orders",
        fmt_u(users as u64),
        fmt_u(orders as u64)
    )
}

/// The pages of every region of one workload, added up.
fn total(w: &WorkloadPages) -> RegionPages {
    let mut t = RegionPages::default();
    for r in w.regions.values() {
        t.accessed += r.accessed;
        t.dirty += r.dirty;
        t.tracker_instructions += r.tracker_instructions;
        t.changed += r.changed;
        t.old_instructions += r.old_instructions;
    }
    t
}

/// Cycles per write of `w` under `profile` (0: the tracker's rules, 1: PocketIC 13's).
pub(crate) fn per_write(w: &WorkloadPages, profile: usize) -> f64 {
    w.cycles_per_message[profile] / w.writes_per_message.max(1) as f64
}

fn change(x: f64, reference: f64) -> String {
    if reference <= 0.0 {
        return "-".to_string();
    }
    let d = (x / reference - 1.0) * 100.0;
    if d.abs() < 0.05 {
        "0.0 %".to_string()
    } else {
        format!("{d:+.1} %")
    }
}

fn pages(x: f64) -> String {
    if x >= 100.0 {
        fmt_u(x.round() as u64)
    } else {
        format!("{x:.2}")
    }
}

/// Renders the comparison: the builds, then one table per workload with a row per build, the
/// reference (the first build) first. Fails when the builds did not run the same workloads.
pub fn render(
    builds: &[Build],
    fixture: Fixture,
    label_lead: &str,
    label_old: &str,
) -> anyhow::Result<String> {
    let tables = tables(builds, "build", "###")?;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "*{label_lead}; {label_old}*\n\nEach build is the reference canister's deployable wasm with one \
         setting changed (`scripts/levers.sh` builds them with `scripts/build.sh lever` and runs `bench-suite \
         levers`); the workloads are those of the report's section on where the pages go, on a fresh canister \
         holding {}. Cycles per write on a 13-node subnet; the change is against the first row. \
         Wasm pages: 64 KiB pages the tracker charged a first access / a first write, per message; 4 KiB \
         pages: those changed under PocketIC 13's rules.\n",
        fixture_words(fixture)
    );
    for b in builds {
        let _ = writeln!(o, "- `{}`: sha256 {}", b.name, b.sha256);
    }
    o.push_str(&tables);
    Ok(o)
}

/// One table per workload with a row per build, the first build first and each change against
/// it; `what` heads the builds' column, and each table has a heading of its workload that begins
/// with `heading` (`###`, or `#### both bindings:`). Fails when the builds did not run the same
/// workloads.
pub fn tables(builds: &[Build], what: &str, heading: &str) -> anyhow::Result<String> {
    let Some(reference) = builds.first() else {
        anyhow::bail!("no build to compare");
    };
    for b in builds {
        let names = |b: &Build| {
            b.workloads
                .iter()
                .map(|w| w.workload.clone())
                .collect::<Vec<_>>()
        };
        anyhow::ensure!(
            names(b) == names(reference),
            "{} ran other workloads than {}",
            b.name,
            reference.name
        );
    }
    let mut o = String::new();
    for (i, w) in reference.workloads.iter().enumerate() {
        let _ = writeln!(
            o,
            "\n{heading} {} ({} write{} per message)\n",
            w.workload,
            fmt_u(w.writes_per_message),
            if w.writes_per_message == 1 { "" } else { "s" }
        );
        let header = [
            what,
            "cycles per write (tracker)",
            "change",
            "cycles per write (PocketIC 13)",
            "change",
            "Wasm pages accessed / dirty",
            "4 KiB pages changed",
        ];
        let mut rows = Vec::new();
        for b in builds {
            let bw = &b.workloads[i];
            let t = total(bw);
            rows.push(vec![
                format!("`{}`", b.name),
                fmt_u(per_write(bw, 0).round() as u64),
                change(per_write(bw, 0), per_write(w, 0)),
                fmt_u(per_write(bw, 1).round() as u64),
                change(per_write(bw, 1), per_write(w, 1)),
                format!("{} / {}", pages(t.accessed), pages(t.dirty)),
                pages(t.changed),
            ]);
        }
        o.push_str(&crate::summary::padded_table(
            &header,
            &[false, true, true, true, true, true, true],
            &rows,
        ));
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn workload(name: &str, writes: u64, cycles: [f64; 2], accessed: f64) -> WorkloadPages {
        let mut regions = BTreeMap::new();
        regions.insert(
            "heap: stack".to_string(),
            RegionPages {
                accessed,
                dirty: 1.0,
                tracker_instructions: 0.0,
                changed: 2.5,
                old_instructions: 0.0,
            },
        );
        regions.insert(
            "stable: database file (memory 120)".to_string(),
            RegionPages {
                accessed: 2.0,
                dirty: 2.0,
                tracker_instructions: 0.0,
                changed: 150.0,
                old_instructions: 0.0,
            },
        );
        WorkloadPages {
            workload: name.to_string(),
            writes_per_message: writes,
            cycles_per_message: cycles,
            regions,
        }
    }

    #[test]
    fn each_build_is_compared_with_the_first() {
        let builds = [
            Build {
                name: "reference".into(),
                sha256: "aa".into(),
                workloads: vec![
                    workload("one", 1, [10_000_000.0, 6_000_000.0], 3.0),
                    workload("many", 1_000, [50_000_000.0, 40_000_000.0], 30.0),
                ],
            },
            Build {
                name: "cache_size=-2000".into(),
                sha256: "bb".into(),
                workloads: vec![
                    workload("one", 1, [9_000_000.0, 6_000_000.0], 1.0),
                    workload("many", 1_000, [55_000_000.0, 40_400_000.0], 130.0),
                ],
            },
        ];
        let out = render(&builds, Fixture::Small, "engine: a", "engine: b").unwrap();
        let tables = out.split("\n### ").collect::<Vec<_>>();
        assert_eq!(tables.len(), 3, "{out}");
        assert!(tables[0].starts_with("*engine: a; engine: b*\n"));
        assert!(tables[0].ends_with("- `reference`: sha256 aa\n- `cache_size=-2000`: sha256 bb\n"));
        // Pages: the regions' sum (stack and database file); 4 KiB pages 2.5 + 150, rounded
        // from 100 up.
        assert_eq!(
            tables[1],
            "one (1 write per message)

| build              | cycles per write (tracker) |  change | cycles per write (PocketIC 13) | change | Wasm pages accessed / dirty | 4 KiB pages changed |
| ------------------ | -------------------------: | ------: | -----------------------------: | -----: | --------------------------: | ------------------: |
| `reference`        |                 10,000,000 |   0.0 % |                      6,000,000 |  0.0 % |                 5.00 / 3.00 |                 153 |
| `cache_size=-2000` |                  9,000,000 | -10.0 % |                      6,000,000 |  0.0 % |                 3.00 / 3.00 |                 153 |
"
        );
        // Per write: the message's cycles over its 1,000 writes.
        assert_eq!(
            tables[2],
            "many (1,000 writes per message)

| build              | cycles per write (tracker) |  change | cycles per write (PocketIC 13) | change | Wasm pages accessed / dirty | 4 KiB pages changed |
| ------------------ | -------------------------: | ------: | -----------------------------: | -----: | --------------------------: | ------------------: |
| `reference`        |                     50,000 |   0.0 % |                         40,000 |  0.0 % |                32.00 / 3.00 |                 153 |
| `cache_size=-2000` |                     55,000 | +10.0 % |                         40,400 | +1.0 % |                  132 / 3.00 |                 153 |
"
        );
    }

    #[test]
    fn builds_of_other_workloads_are_refused() {
        let a = Build {
            name: "reference".into(),
            sha256: "aa".into(),
            workloads: vec![workload("one", 1, [1.0, 1.0], 1.0)],
        };
        let mut b = a.clone();
        b.name = "other".into();
        b.workloads[0].workload = "two".into();
        let err = render(&[a, b], Fixture::Small, "x", "y")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "other ran other workloads than reference");
        assert_eq!(
            render(&[], Fixture::Small, "x", "y")
                .unwrap_err()
                .to_string(),
            "no build to compare"
        );
    }
}
