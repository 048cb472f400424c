//! The suite's measurements under the replica's rules with the deterministic memory tracker
//! (`offline_engine::Metering::IC_DMT`, `src/offline_engine/METERING.md` §10), beside the rules
//! of PocketIC 13 every other table is metered by: the canbench benches and the message-level
//! runs again, on an engine of their own (one of the suite's independent runs, beside the
//! others: [`crate::suite::run`]).

use anyhow::{Context, Result};
use offline_engine::Metering;
use serde::{Deserialize, Serialize};

use crate::analysis::{self, GainRow, fmt_f};
use crate::engine_runs::{self, CanbenchRun};
use crate::fees::FeeSchedule;
use crate::message_bench::{self, Mode, ModeRun, ModeSummary};
use crate::progress::Progress;
use crate::suite::{BUILD_HINT_CANBENCH, BUILD_HINT_DEPLOYABLE, SuiteConfig};
use crate::summary::{cycles_text, padded_table, usd_text};

/// The profile the report leads with: the replica's rules with the deterministic memory tracker.
pub const LEAD: Metering = Metering::IC_DMT;

/// The figures of one metering profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRun {
    /// The profile's name (`offline-engine --metering`).
    pub metering: String,
    /// What its rules are and where they come from.
    pub source: String,
    /// The engine label with the profile, as its figures carry it.
    pub engine: String,
    /// canbench figures under the profile.
    pub canbench: CanbenchRun,
    /// The gain table of those figures (instructions per op by kind and N).
    pub gains: Vec<GainRow>,
    /// Message-level summaries with cycles and US$.
    pub messages: Vec<ModeSummary>,
    /// Where the pages of three workloads go, by region, under this profile and the rules of
    /// PocketIC 13 ([`crate::regions`]).
    #[serde(default)]
    pub regions: Vec<crate::regions::WorkloadPages>,
    /// The message-level runs (every message; not in `results.json`).
    #[serde(skip)]
    pub message_runs: Vec<ModeRun>,
    /// Seconds from the suite's start until the profile's runs ended (they run beside the
    /// suite's other runs).
    pub wall_seconds: f64,
}

/// The canbench benches of `config` under `metering` (the suite runs them, and
/// [`messages`], as runs of their own, then joins them with [`join`]).
pub fn canbench(
    config: &SuiteConfig,
    metering: Metering,
    progress: &mut Progress,
) -> Result<CanbenchRun> {
    let engine = engine_runs::engine_with(metering)?;
    let program = engine_runs::load(&engine, &config.canbench_wasm, BUILD_HINT_CANBENCH)?;
    engine_runs::run_canbench(
        &engine,
        &program,
        &config.canbench_init_arg,
        None,
        &|_| true,
        progress,
    )
}

/// The message-level runs of `config` and the pages by region ([`page_regions`]) under
/// `metering`.
pub fn messages(
    config: &SuiteConfig,
    metering: Metering,
    fees: &FeeSchedule,
    progress: &mut Progress,
) -> Result<(Vec<ModeRun>, Vec<crate::regions::WorkloadPages>)> {
    let engine = engine_runs::engine_with(metering)?;
    let deployable = engine_runs::load(&engine, &config.deployable_wasm, BUILD_HINT_DEPLOYABLE)?;
    let mut fixtures =
        engine_runs::Fixtures::new(&engine, &deployable, engine_runs::Fixture::Small);
    let message_runs =
        fixtures.run_modes(config.scale.message_sizes(), "message-level", progress)?;
    let regions = page_regions(
        &config.deployable_wasm,
        &engine,
        &deployable,
        engine_runs::Fixture::Small,
        fees,
        progress,
    )?;
    Ok((message_runs, regions))
}

/// The figures of `metering` from its [`canbench`] and [`messages`] runs; `wall_seconds`:
/// when the later of the two ended, from the suite's start.
pub fn join(
    metering: Metering,
    fees: &FeeSchedule,
    canbench: CanbenchRun,
    (message_runs, regions): (Vec<ModeRun>, Vec<crate::regions::WorkloadPages>),
    wall_seconds: f64,
) -> ProfileRun {
    ProfileRun {
        regions,
        metering: metering.name.to_string(),
        source: metering.source.to_string(),
        engine: engine_runs::profile_label(&metering),
        gains: analysis::gain_rows(&canbench.benches),
        canbench,
        messages: message_runs
            .iter()
            .map(|r| message_bench::summarize(fees, r))
            .collect(),
        message_runs,
        wall_seconds,
    }
}

/// The pages of one `create_order` per message and of packed batches of 1,000 and 10,000 by
/// region, on the deployable wasm at `path` (loaded into `engine` as `deployable`) holding
/// `fixture`, under `engine`'s profile (the tracker's) and the rules of PocketIC 13.
pub fn page_regions(
    path: &std::path::Path,
    engine: &offline_engine::Engine,
    deployable: &offline_engine::Program,
    fixture: engine_runs::Fixture,
    fees: &FeeSchedule,
    progress: &mut Progress,
) -> Result<Vec<crate::regions::WorkloadPages>> {
    use crate::engine_runs::PageWorkload;
    use crate::regions::{self, HeapLayout};
    let wasm = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let heap = HeapLayout::of(&wasm)?;
    let old_engine = engine_runs::engine()?;
    let old_program = engine_runs::load(&old_engine, path, BUILD_HINT_DEPLOYABLE)?;
    let mut workloads = vec![(
        "one `create_order` per message".to_string(),
        1,
        PageWorkload::Unbatched(regions::UNBATCHED_MESSAGES),
    )];
    for n in regions::PACKED_SIZES {
        workloads.push((
            format!("a packed batch of {}", analysis::fmt_u(n as u64)),
            n as u64,
            PageWorkload::Packed(n),
        ));
    }
    let mut tracker_fixtures = engine_runs::Fixtures::new(engine, deployable, fixture);
    let mut old_fixtures = engine_runs::Fixtures::new(&old_engine, &old_program, fixture);
    let mut out = Vec::new();
    for (name, writes, w) in workloads {
        progress.step(&format!("pages by region: {name}"));
        let tracker = engine_runs::trace_pages(&mut tracker_fixtures, w)?;
        let old = engine_runs::trace_pages(&mut old_fixtures, w)?;
        out.push(regions::attribute(
            &name, writes, &heap, &tracker, &old, fees,
        )?);
    }
    Ok(out)
}

/// One path at one N under both profiles: the opening table's row.
#[derive(Debug, Clone, PartialEq)]
pub struct BothRow {
    /// The path.
    pub mode: Mode,
    /// Writes per message or flush.
    pub n: u64,
    /// Under the tracker's rules.
    pub lead: ModeSummary,
    /// Under the rules of PocketIC 13.
    pub old: ModeSummary,
}

/// The rows both profiles measured, at the N values the summary shows
/// ([`crate::summary::SUMMARY_NS`]), in the lead profile's order.
pub fn both_rows(lead: &[ModeSummary], old: &[ModeSummary]) -> Vec<BothRow> {
    let shown = crate::summary::summarize(lead, &crate::fees::IC_2025).ns;
    let mut rows = Vec::new();
    for &n in &shown {
        for l in lead.iter().filter(|m| m.n == n) {
            if let Some(o) = old.iter().find(|o| o.mode == l.mode && o.n == n) {
                rows.push(BothRow {
                    mode: l.mode,
                    n,
                    lead: l.clone(),
                    old: o.clone(),
                });
            }
        }
    }
    rows
}

/// Cycles per write of one call per op over those of `mode` at `n` (13 nodes), under each
/// profile's summaries; `None` when either was not measured.
pub fn ratio(messages: &[ModeSummary], mode: Mode, n: u64) -> Option<f64> {
    let unbatched = messages
        .iter()
        .filter(|m| m.mode == Mode::Unbatched)
        .max_by_key(|m| m.n)?;
    let other = messages.iter().find(|m| m.mode == mode && m.n == n)?;
    (other.cycles_per_million_ops[0] > 0).then(|| {
        unbatched.cycles_per_million_ops[0] as f64 / other.cycles_per_million_ops[0] as f64
    })
}

/// Wasm pages (64 KiB) the tracker charged per write: (accessed, dirty), heap and stable.
pub fn tracked_per_write(m: &ModeSummary) -> (f64, f64) {
    let n = m.n.max(1) as f64;
    let t = &m.tracked;
    (
        (t.heap_accessed + t.stable_accessed) as f64 / n,
        (t.heap_dirty + t.stable_dirty) as f64 / n,
    )
}

fn pages_text(x: f64) -> String {
    if x >= 10.0 {
        fmt_f(x)
    } else {
        format!("{x:.2}")
    }
}

/// The opening table: cycles and US$ per million writes by path (13 nodes) under the tracker's
/// rules beside the old rules, with the pages per write each profile charges.
pub fn render_both(rows: &[BothRow]) -> String {
    let header = [
        "path",
        "N",
        "cycles / 1M writes, tracker",
        "US$ / 1M writes, tracker",
        "cycles / 1M writes, PocketIC 13",
        "US$ / 1M writes, PocketIC 13",
        "tracker / PocketIC 13",
        "Wasm pages accessed / dirty per write (tracker)",
        "4 KiB pages changed per write (PocketIC 13)",
        "page share of the bill, tracker / PocketIC 13",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let (accessed, dirty) = tracked_per_write(&r.lead);
            let share = |m: &ModeSummary| {
                // Cycles of the pages' instructions (1 cycle each on 13 nodes) over the run's.
                let cycles = m.cycles[0].max(1) as f64;
                format!("{:.1} %", m.tracked.instructions as f64 / cycles * 100.0)
            };
            vec![
                r.mode.label().to_string(),
                analysis::fmt_u(r.n),
                cycles_text(r.lead.cycles_per_million_ops[0]),
                format!("{:.2}", r.lead.usd_per_million_ops[0]),
                cycles_text(r.old.cycles_per_million_ops[0]),
                format!("{:.2}", r.old.usd_per_million_ops[0]),
                format!(
                    "{:.2}×",
                    r.lead.cycles_per_million_ops[0] as f64
                        / r.old.cycles_per_million_ops[0].max(1) as f64
                ),
                format!("{} / {}", pages_text(accessed), pages_text(dirty)),
                pages_text(r.old.changed_pages as f64 / r.n.max(1) as f64),
                format!("{} / {}", share(&r.lead), share(&r.old)),
            ]
        })
        .collect();
    let mut right = [true; 10];
    right[0] = false;
    padded_table(&header, &right, &body)
}

/// The sentences under the opening table: what one call per write costs against a packed batch
/// of 10,000 (else the largest measured) under each profile.
pub fn ratio_sentences(lead: &ProfileRun, old: &[ModeSummary]) -> Vec<String> {
    let mut out = Vec::new();
    let Some(n) = lead
        .messages
        .iter()
        .filter(|m| m.mode == Mode::ClientBatchPacked)
        .map(|m| m.n)
        .max()
    else {
        return out;
    };
    let (Some(new), Some(was)) = (
        ratio(&lead.messages, Mode::ClientBatchPacked, n),
        ratio(old, Mode::ClientBatchPacked, n),
    ) else {
        return out;
    };
    let price = |ms: &[ModeSummary], mode: Mode, n: u64| {
        ms.iter()
            .find(|m| m.mode == mode && m.n == n)
            .map(|m| usd_text(m.usd_per_million_ops[0]))
            .unwrap_or_default()
    };
    let largest_unbatched = |ms: &[ModeSummary]| {
        ms.iter()
            .filter(|m| m.mode == Mode::Unbatched)
            .map(|m| m.n)
            .max()
            .unwrap_or(0)
    };
    let (lu, ou) = (largest_unbatched(&lead.messages), largest_unbatched(old));
    out.push(format!(
        "Under the replica's rules with the deterministic memory tracker (`{}`), one call per write costs {} per \
         million writes on a 13-node subnet and a packed batch of {} writes {}: {:.0}× less. Under the rules of \
         PocketIC 13 and canbench 0.7.0 (`pocketic-13`) the same writes cost {} and {}: {:.0}× less.",
        lead.metering,
        price(&lead.messages, Mode::Unbatched, lu),
        analysis::fmt_u(n),
        price(&lead.messages, Mode::ClientBatchPacked, n),
        new,
        price(old, Mode::Unbatched, ou),
        price(old, Mode::ClientBatchPacked, n),
        was,
    ));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::message_bench::TrackedPages;

    /// The synthetic runs of the suite's tests metered as the tracker would: every message
    /// 80,000 instructions more per Wasm page, 6 pages accessed and 3 dirty per message.
    pub(crate) fn synthetic_tracker() -> ProfileRun {
        let fees = crate::fees::IC_2025;
        let mut runs = crate::suite::tests::synthetic_runs();
        for run in &mut runs {
            for m in &mut run.messages {
                m.tracked = TrackedPages {
                    heap_accessed: 4,
                    heap_dirty: 2,
                    stable_accessed: 2,
                    stable_dirty: 1,
                    instructions: 9 * 80_000,
                };
                m.instructions += 9 * 80_000;
                m.billed_instructions += 9 * 80_000;
            }
        }
        let canbench = crate::suite::tests::synthetic_canbench();
        ProfileRun {
            metering: LEAD.name.into(),
            source: LEAD.source.into(),
            engine: engine_runs::profile_label(&LEAD),
            gains: analysis::gain_rows(&canbench.benches),
            canbench,
            messages: runs
                .iter()
                .map(|r| message_bench::summarize(&fees, r))
                .collect(),
            message_runs: runs,
            regions: vec![crate::regions::WorkloadPages {
                workload: "one `create_order` per message".into(),
                writes_per_message: 1,
                cycles_per_message: [8_000_000.0, 7_000_000.0],
                regions: [
                    ("heap: stack", 2.0, 2.0, 4.0),
                    ("stable: database file (memory 120)", 3.0, 1.0, 1.0),
                ]
                .into_iter()
                .map(|(name, accessed, dirty, changed)| {
                    (
                        name.to_string(),
                        crate::regions::RegionPages {
                            accessed,
                            dirty,
                            tracker_instructions: (accessed + dirty) * 80_000.0,
                            changed,
                            old_instructions: changed * 1_000.0,
                        },
                    )
                })
                .collect(),
            }],
            wall_seconds: 2.0,
        }
    }

    #[test]
    fn both_profiles_side_by_side() {
        let r = crate::suite::tests::synthetic_results();
        let t = synthetic_tracker();
        let rows = both_rows(&t.messages, &r.messages);
        assert_eq!(rows.len(), 4); // N = 100, four paths
        for row in &rows {
            assert_eq!(row.lead.mode, row.old.mode);
            // 9 tracked pages per message at 80,000 each: the tracker's bill is higher.
            assert!(row.lead.cycles_per_million_ops[0] > row.old.cycles_per_million_ops[0]);
        }
        // One call per op at N = 100: 100 messages of 6 accessed and 3 dirty pages, per write.
        assert_eq!(tracked_per_write(&rows[0].lead), (6.0, 3.0));
        // The packed batch: one message for 100 writes.
        let packed = rows
            .iter()
            .find(|r| r.mode == Mode::ClientBatchPacked)
            .unwrap();
        assert_eq!(tracked_per_write(&packed.lead), (0.06, 0.03));
        let new = ratio(&t.messages, Mode::ClientBatchPacked, 100).unwrap();
        let old = ratio(&r.messages, Mode::ClientBatchPacked, 100).unwrap();
        assert!(new > old, "{new} vs {old}");
        let s = ratio_sentences(&t, &r.messages);
        assert_eq!(s.len(), 1);
        assert!(s[0].contains(&format!("{new:.0}× less")), "{}", s[0]);
        // Nothing is invented for a path one profile did not measure.
        let fewer: Vec<ModeSummary> = r
            .messages
            .iter()
            .filter(|m| m.mode != Mode::ClientBatch)
            .cloned()
            .collect();
        assert_eq!(both_rows(&t.messages, &fewer).len(), 3);
    }
}
