//! Flushes that trap because of the environment, not an op: a memory allocation that leaves
//! the heap no room to grow makes every flush trap ("cannot grow its memory usage"), whatever
//! it runs. The watchdog must not take that for an op that makes flushes trap: its probe (a
//! flush's kind of work without any op) traps too, so it raises the alarm, keeps every op
//! queued and probes once per period; the queries keep answering; once the limit is lifted,
//! every op commits. Build the wasm first with scripts/build.sh.

use bench_api::*;
use bench_suite::client::{CONTROLLER, Client};
use offline_engine::MessageResult;

/// One second: the flush timer's period here.
const SECOND: u64 = 1_000_000_000;

/// Ops queued before the memory runs out.
const OPS: u64 = 1_000;

fn user(i: u64) -> (String, String) {
    (format!("user{i}"), format!("user{i}@example.com"))
}

#[test]
fn a_memory_allocation_without_headroom_removes_no_op_and_every_op_commits_once_lifted() {
    let mut c = Client::install(InitArgs {
        flush_size: Some(2 * OPS),
        max_pending: Some(2 * OPS),
        outcome_capacity: Some(2 * OPS),
        ..Default::default()
    });
    let tickets: Vec<Ticket> = (0..OPS)
        .map(|i| {
            let (name, email) = user(i);
            match c.submit_as(CONTROLLER, "submit_create_user", (name, email)) {
                SubmitResult::Ok(t) => t,
                other => panic!("submit {i}: {other:?}"),
            }
        })
        .collect();
    // The allocation is what the canister uses now: the heap cannot grow.
    let used = c.canister.memory_usage();
    c.canister.set_memory_limits(0, used);

    let before = c.log.len();
    for _ in 0..60 {
        c.tick(SECOND);
    }
    // What trapped: the timer's normal flush (the stall is not known yet), the first careful
    // flush, then the probe that followed it, once per period; every trap is the memory's.
    let trapped: Vec<&str> = c.log[before..]
        .iter()
        .filter(|e| e.result.is_trap())
        .map(|e| e.entry.as_str())
        .collect();
    let mut expected = vec![
        "canister_update <ic-cdk internal> timer_executor",
        "canister_update __careful_flush",
    ];
    expected.extend(["canister_update __careful_probe"; 58]);
    assert_eq!(trapped, expected);
    assert!(
        c.log[before..].iter().all(|e| !matches!(
            &e.result,
            MessageResult::Trap(m) if !m.contains("cannot grow its memory usage")
        )),
        "every trap is the memory's"
    );
    // The queries answer: stats, settings, writers, ticket_status and ticket_statuses.
    let s = c.stats();
    assert_eq!(
        (
            s.pending,
            s.committed,
            s.failed,
            s.interrupted,
            s.timer_armed
        ),
        (OPS, 0, 0, 0, true)
    );
    let alarm = s.alarm.expect("the alarm is raised");
    assert!(
        alarm.starts_with(
            "flushes trap for a reason no op causes: a probe that runs no op failed too ("
        ),
        "{alarm}"
    );
    assert!(
        alarm.ends_with("every queued op stays pending and the timer probes again once per period"),
        "{alarm}"
    );
    let last = s.last_error.expect("the probe's error");
    assert!(
        last.starts_with("watchdog: the probe, which runs no op, was rejected with code 5: ")
            && last.contains("cannot grow its memory usage"),
        "{last}"
    );
    assert_eq!(c.settings().max_pending, 2 * OPS);
    assert!(
        c.query::<Vec<candid::Principal>, _>("writers", ())
            .is_empty()
    );
    assert_eq!(c.ticket(tickets[0]), TicketStatus::Pending);
    assert_eq!(
        c.tickets(tickets[0], OPS),
        vec![TicketStatus::Pending; OPS as usize]
    );
    // Once the environment is known, one probe per period traps, nothing else.
    let before = c.log.len();
    for _ in 0..10 {
        c.tick(SECOND);
    }
    let trapped: Vec<&str> = c.log[before..]
        .iter()
        .filter(|e| e.result.is_trap())
        .map(|e| e.entry.as_str())
        .collect();
    assert_eq!(trapped, vec!["canister_update __careful_probe"; 10]);

    // The limit is lifted: every op commits, in order, and the alarm is over.
    c.canister.set_memory_limits(0, 0);
    for _ in 0..20 {
        if c.stats().pending == 0 {
            break;
        }
        c.tick(SECOND);
    }
    let s = c.stats();
    assert_eq!(
        (s.pending, s.committed, s.failed, s.alarm, s.timer_armed),
        (0, OPS, 0, None, false)
    );
    let committed: Vec<TicketStatus> = (1..=OPS as i64)
        .map(|rowid| TicketStatus::Committed {
            rows_changed: 1,
            last_insert_rowid: rowid,
        })
        .collect();
    assert_eq!(c.tickets(tickets[0], OPS), committed);
    assert_eq!(
        c.counts(),
        Counts {
            users: OPS,
            orders: 0
        }
    );
}

#[test]
fn the_probe_is_the_canister_s_own() {
    let mut c = Client::install(InitArgs::default());
    // Not through ingress (inspect_message refuses it), not from another canister.
    let arg = candid::encode_args(()).unwrap();
    for caller in [CONTROLLER, bench_suite::client::STRANGER] {
        let exec = c
            .canister
            .update_as(caller, "__careful_probe", &arg)
            .unwrap();
        assert_eq!(exec.entry, "canister_inspect_message", "{exec:?}");
        let exec = c
            .canister
            .update_from_canister(caller, "__careful_probe", &arg)
            .unwrap();
        let reply: Result<(), WriteError> = bench_suite::client::decode("__careful_probe", &exec);
        assert_eq!(reply, Err(WriteError::NotAuthorized));
    }
}

#[test]
fn the_queue_s_queries_answer_without_headroom_after_an_upgrade() {
    // After an upgrade SQLite's page cache is empty; a keyed batch has created the key store.
    let mut c = Client::install(InitArgs::default());
    let key = BatchKey {
        created_at_time: 1_700_000_000_000_000_000,
        id: [7; 16],
    };
    let ops = vec![UserOrderOp::CreateUser {
        username: "k".into(),
        email: "k@example.com".into(),
    }];
    let r: BatchResult = c.update("execute_batch", (ops, Some(key)));
    assert!(matches!(r, BatchResult::Ok(_)), "{r:?}");
    let tickets: Vec<Ticket> = (0..10)
        .map(|i| {
            let (name, email) = user(i);
            match c.submit_as(CONTROLLER, "submit_create_user", (name, email)) {
                SubmitResult::Ok(t) => t,
                other => panic!("submit {i}: {other:?}"),
            }
        })
        .collect();
    let upgrade = c.upgrade(None);
    assert!(!upgrade.result.is_trap(), "{:?}", upgrade.result);
    let used = c.canister.memory_usage();
    c.canister.set_memory_limits(0, used);
    let s = c.stats();
    assert_eq!((s.pending, s.keyed_batches, s.keys_held), (10, 1, 1));
    assert_eq!(c.settings().flush_size, 100);
    assert!(
        c.query::<Vec<candid::Principal>, _>("writers", ())
            .is_empty()
    );
    assert_eq!(c.ticket(tickets[9]), TicketStatus::Pending);
    assert_eq!(c.tickets(tickets[0], 10), vec![TicketStatus::Pending; 10]);
}
