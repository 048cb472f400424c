//! `bench/REPORT.md`: every table labelled with the engine and the date, the targets and whether
//! they are met (with the scopes when missed), the fee schedule and the models' assumptions.
//! Each section is a function of the suite's results (`SECTIONS`, in the submodules); [`render`]
//! joins them.

use crate::suite::SuiteResults;
use crate::which_path::ClientFigures;
pub use inputs::ChartLink;
use inputs::{Inputs, label};

mod appendices;
mod canbench;
mod inputs;
mod load;
mod message_level;
mod opening;
mod peer;

/// A section of the report: what it is called (its golden file is `report/<name>.md` under
/// `tests/expected`) and the function that renders it.
type Section = (&'static str, fn(&Inputs) -> String);

/// The report's sections, in the order it shows them.
const SECTIONS: [Section; 21] = [
    ("title", opening::title),
    ("answer", opening::answer),
    ("which_path", opening::which_path),
    ("page_regions", opening::page_regions),
    ("charts", opening::charts),
    ("message_level", message_level::message_level),
    ("full_scale", message_level::full_scale),
    ("call_overhead", message_level::call_overhead),
    ("call_profiles", message_level::call_profiles),
    ("wire_shapes", message_level::wire_shapes),
    ("gains", canbench::gains),
    ("floor", canbench::floor),
    ("errors", canbench::errors),
    ("flush_size", canbench::flush_size),
    ("users_orders", canbench::users_orders),
    ("peer_vfs", peer::peer_vfs),
    ("load", load::load),
    ("targets", appendices::targets),
    ("reliability", appendices::reliability),
    ("measured", appendices::measured),
    ("reproduce", appendices::reproduce),
];

/// Renders the report, section by section; `client` holds the committed markdown of the
/// end-to-end commands (the "which path when" table reads the client paths' figures from it).
pub fn render(r: &SuiteResults, charts: &[ChartLink], client: &ClientFigures) -> String {
    let inputs = Inputs {
        results: r,
        charts,
        client,
        label: label(r),
    };
    SECTIONS
        .iter()
        .map(|(_, section)| section(&inputs))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::suite::tests::synthetic_results;

    /// Compares `actual` with `tests/expected/<name>`; `BLESS=1` rewrites the file instead (then
    /// review the diff), as canbench's CLI tests do with their expected outputs.
    pub(crate) fn golden(name: &str, actual: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/expected")
            .join(name);
        if std::env::var_os("BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run with BLESS=1 to create it", path.display()));
        if expected != actual {
            let first = expected
                .lines()
                .zip(actual.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(expected.lines().count().min(actual.lines().count()));
            panic!(
                "{} differs from the rendering at line {}:\n  expected: {:?}\n  actual:   {:?}\n(BLESS=1 rewrites it)",
                path.display(),
                first + 1,
                expected.lines().nth(first),
                actual.lines().nth(first)
            );
        }
    }

    /// The synthetic results of the golden tests: the suite's, with a fixed date and wall time,
    /// a reliability row and a worst-case flush.
    fn golden_results() -> SuiteResults {
        let mut r = synthetic_results();
        r.date = "2026-01-01".into();
        r.wall_seconds = 12.5;
        r.reliability = vec![crate::reliability::ScenarioResult {
            name: "heavy op".into(),
            description: "200 orders around an endless insert".into(),
            acknowledged: 201,
            committed: 200,
            failed: 1,
            lost: 0,
            altered: 0,
            failed_without_cause: 0,
            applied_twice: 0,
            refused: 0,
            trapped: 0,
            rounds_to_drain: 3,
        }];
        r.worst_case_flush = Some(crate::reliability::WorstCaseFlush {
            budget: 1_000_000_000,
            ops_before: 33_333,
            mixed_flush_instructions: 2_643_594_017,
            alone_flush_instructions: 2_002_414_199,
            varying_limit: 200_000_000,
            varying_budget: 53_333_333,
            varying_ops: 240,
            varying_flushes: 119,
            varying_capped: 4,
            varying_trapped: 0,
            varying_most: 160_444_810,
        });
        r.peer = Some(crate::peer::tests::synthetic_peer());
        r
    }

    fn golden_charts() -> Vec<ChartLink> {
        vec![ChartLink {
            title: "insert".into(),
            file: "per_op_insert.svg".into(),
        }]
    }

    #[test]
    fn the_report_renders_as_expected() {
        let r = golden_results();
        golden(
            "report.md",
            &render(&r, &golden_charts(), &ClientFigures::default()),
        );
    }

    /// Compares the section `name` of the golden results, with two `codec_*` benches added (the
    /// wire-shape table has rows then) and profiles of a client batch at both fixtures (what
    /// grows at full scale), with `tests/expected/report/<name>.md`.
    fn golden_section(name: &str) {
        let mut r = golden_results();
        for (full_scale, per_op) in [(false, [27, 1_356, 919]), (true, [844, 1_863, 1_208])] {
            let functions = [
                "pcache1TruncateUnsafe",
                "sqlite3BtreeIndexMoveto",
                "sqlite3BtreeTableMoveto",
            ];
            r.call_profiles.push(crate::call_profile::CallProfile {
                method: "execute_batch_packed".into(),
                full_scale,
                self_by_function: functions
                    .iter()
                    .zip(per_op)
                    .map(|(f, n)| (f.to_string(), n * 1_000))
                    .collect(),
                ops: 1_000,
                instructions: per_op.iter().sum::<u64>() * 1_000,
                parts: vec![0, 0, 0, per_op.iter().sum::<u64>() * 1_000, 0, 0, 0],
            });
        }
        for (bench, instructions) in [
            ("codec_reply_submit_result_wire", 511_205),
            ("codec_arg_batch_1000_packed", 352_805),
        ] {
            r.canbench.benches.insert(
                bench.into(),
                crate::engine_runs::CanbenchFigures {
                    total: crate::engine_runs::Measured {
                        calls: 1,
                        instructions,
                        ..Default::default()
                    },
                    scopes: Default::default(),
                },
            );
        }
        let charts = golden_charts();
        let client = ClientFigures::default();
        let inputs = Inputs {
            results: &r,
            charts: &charts,
            client: &client,
            label: label(&r),
        };
        let (_, section) = SECTIONS
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no section {name}"));
        golden(&format!("report/{name}.md"), &section(&inputs));
    }

    /// One golden test per section, named after it.
    macro_rules! section_goldens {
        ($($name:ident),* $(,)?) => {
            mod sections {
                $(
                    #[test]
                    fn $name() {
                        super::golden_section(stringify!($name));
                    }
                )*

                #[test]
                fn every_section_has_its_golden_test() {
                    let tested = [$(stringify!($name)),*];
                    let sections: Vec<&str> = super::SECTIONS.iter().map(|(n, _)| *n).collect();
                    assert_eq!(sections, tested);
                }
            }
        };
    }

    section_goldens!(
        title,
        answer,
        which_path,
        page_regions,
        charts,
        message_level,
        full_scale,
        call_overhead,
        call_profiles,
        wire_shapes,
        gains,
        floor,
        errors,
        flush_size,
        users_orders,
        peer_vfs,
        load,
        targets,
        reliability,
        measured,
        reproduce,
    );

    #[test]
    fn every_table_is_labelled_with_engine_and_date() {
        let r = synthetic_results();
        let md = render(&r, &golden_charts(), &ClientFigures::default());
        // Each label names its metering profile (`pocketic-13` or `ic-dmt-0441fbd7`).
        let label = format!(
            "*engine: offline (wasmtime, IC metering: pocketic-13) · {} ·",
            r.date
        );
        let lead = format!(
            "*engine: offline (wasmtime, IC metering: ic-dmt-0441fbd7) · {} ·",
            r.date
        );
        assert!(md.contains(&lead), "the tracker's table is labelled");
        let tables = md
            .lines()
            .filter(|l| l.starts_with("|---") || l.starts_with("|---:"))
            .count();
        // Every table but the wasm table follows a label line.
        let labels = md.matches(&label).count();
        assert!(labels >= tables - 1, "{labels} labels for {tables} tables");
        for h in [
            "## The answer: what a million writes cost",
            "## Appendix A: internal targets",
            "## Appendix B: reliability",
            "## Appendix C: what was measured",
            "## Performance gains",
            "## Floor",
            "## Error isolation",
            "## Flush size",
            "## The ic-rusqlite users/orders benchmark",
            "## Message level",
            "## Load over rounds (simulation over measured costs)",
            "## Which path when",
            "## Charts",
        ] {
            assert!(md.contains(h), "missing {h}");
        }
        assert!(md.contains("![insert](per_op_insert.svg)"));
        assert!(
            md.contains("| insert | 1,000 | 400,000 | 20,700 | 19.3× |"),
            "{md}"
        );
        // Floor missed (210 M vs 150 M): the breakdown with scopes is there.
        assert!(md.contains("### Cost breakdown of missed targets"));
        assert!(md.contains("| final_flush | 1 | 200,000,000 |"));
        assert!(md.contains("2025-05-22") && md.contains("1.354820"));
        assert!(md.contains("reduced scale"));
        // The answer comes first, the internal targets after every other section.
        let at = |h: &str| md.find(h).unwrap_or_else(|| panic!("missing {h}"));
        assert!(at("## The answer") < at("## Which path when"));
        assert!(at("## Which path when") < at("## Charts"));
        assert!(at("## Charts") < at("## Message level"));
        assert!(at("## Load over rounds") < at("## Appendix A: internal targets"));
        assert!(at("## Appendix A") < at("## Appendix B: reliability"));
        assert!(
            md.lines()
                .nth(2)
                .is_some_and(|l| l.starts_with("Generated by"))
        );
    }
}
