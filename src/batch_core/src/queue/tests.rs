use super::*;
use crate::clock::{Clock, ManualClock};
use crate::meter::CountingMeter;
use crate::op::Statement;
use crate::testing::{count, dump, insert_order, insert_user, insert_user_stmt, open_db};
use rusqlite::ffi::{
    SQLITE_CONSTRAINT_FOREIGNKEY as FOREIGN_KEY, SQLITE_CONSTRAINT_TRIGGER as TRIGGER,
    SQLITE_CONSTRAINT_UNIQUE as UNIQUE,
};

/// A queue configuration; coalescing is on (the default).
fn config(flush_size: usize, max_pending: usize) -> Config {
    Config {
        flush_size,
        max_delay_ns: 1_000,
        max_pending,
        max_pending_bytes: 1 << 20,
        flush_instruction_budget: u64::MAX,
        outcome_capacity: 1_000,
        history_capacity: 1_000,
        coalesce_rows: crate::config::DEFAULT_COALESCE_ROWS,
    }
}

fn user(i: usize) -> WriteOp {
    insert_user(&format!("user{i}"), &format!("{i}@x"))
}

fn committed(rows_changed: u64, last_insert_rowid: i64) -> OpStatus {
    OpStatus::Done(Outcome::Committed {
        rows_changed,
        last_insert_rowid,
    })
}

fn failed(code: i32, error: &str) -> OpStatus {
    OpStatus::Done(Outcome::Failed(OpError {
        code,
        message: error.to_owned(),
    }))
}

fn pending_tickets(queue: &BatchQueue) -> Vec<Ticket> {
    queue.pending().map(|op| op.ticket).collect()
}

#[test]
fn new_validates_the_config() {
    assert_eq!(
        BatchQueue::new(Config {
            flush_size: 0,
            ..Config::default()
        })
        .unwrap_err(),
        ConfigError::ZeroFlushSize
    );
    let queue = BatchQueue::new(config(2, 3)).unwrap();
    assert_eq!(queue.config(), &config(2, 3));
    assert!(queue.is_empty());
    assert_eq!(queue.stats(), Stats::default());
}

#[test]
fn tickets_start_at_one_and_are_monotonic() {
    let mut queue = BatchQueue::new(config(3, 3)).unwrap();
    let conn = open_db();
    let mut tickets = Vec::new();
    for i in 0..3 {
        tickets.push(queue.submit(user(i), 0).unwrap().ticket);
    }
    // Rejected submits consume no ticket.
    assert!(queue.submit(user(3), 0).is_err());
    assert!(queue.submit(WriteOp::Unit(vec![]), 0).is_err());
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    tickets.push(queue.submit(user(4), 0).unwrap().ticket);
    assert_eq!(tickets, vec![1, 2, 3, 4]);
    assert_eq!(queue.status(0), OpStatus::Unknown);
    assert_eq!(queue.status(5), OpStatus::Unknown);
    assert_eq!(queue.status(4), OpStatus::Pending);
}

#[test]
fn full_queue_rejects_and_drops_nothing() {
    let mut queue = BatchQueue::new(config(2, 2)).unwrap();
    let first = queue.submit(user(1), 0).unwrap();
    assert_eq!(
        first,
        Submitted {
            ticket: 1,
            flush_due: false
        }
    );
    let second = queue.submit(user(2), 0).unwrap();
    assert_eq!(
        second,
        Submitted {
            ticket: 2,
            flush_due: true
        }
    );
    let error = queue.submit(user(3), 0).unwrap_err();
    assert_eq!(error, SubmitError::QueueFull { capacity: 2 });
    assert_eq!(error.to_string(), "queue full: 2 ops pending");
    assert_eq!(
        queue.submit(user(3), 0).unwrap_err(),
        SubmitError::QueueFull { capacity: 2 }
    );
    assert_eq!(pending_tickets(&queue), vec![1, 2]);
    let stats = queue.stats();
    assert_eq!((stats.pending, stats.submitted, stats.rejected), (2, 2, 2));
    // After a flush there is room again.
    let conn = open_db();
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(queue.submit(user(3), 0).unwrap().ticket, 3);
}

#[test]
fn empty_unit_is_rejected() {
    let mut queue = BatchQueue::new(config(2, 2)).unwrap();
    let error = queue.submit(WriteOp::Unit(vec![]), 0).unwrap_err();
    assert_eq!(error, SubmitError::EmptyUnit);
    assert_eq!(error.to_string(), "unit has no statements");
    assert!(queue.is_empty());
    assert_eq!(queue.stats().rejected, 1);
}

#[test]
fn next_due_follows_the_oldest_op_and_the_size_trigger() {
    let clock = ManualClock::new(10_000);
    let mut queue = BatchQueue::new(config(3, 10)).unwrap();
    assert_eq!(queue.next_due(clock.now_ns()), None);
    queue.submit(user(1), clock.now_ns()).unwrap();
    assert_eq!(queue.next_due(clock.now_ns()), Some(11_000));
    clock.advance(400);
    let submitted = queue.submit(user(2), clock.now_ns()).unwrap();
    assert!(!submitted.flush_due);
    // Later ops do not push the deadline back.
    assert_eq!(queue.next_due(clock.now_ns()), Some(11_000));
    clock.advance(700);
    // Overdue: the deadline is in the past.
    assert_eq!(queue.next_due(clock.now_ns()), Some(11_000));
    let submitted = queue.submit(user(3), clock.now_ns()).unwrap();
    assert!(submitted.flush_due);
    assert_eq!(queue.next_due(clock.now_ns()), Some(clock.now_ns()));
    // A flush that takes one op leaves the second-oldest as the deadline.
    let conn = open_db();
    let mut one_op = queue.config().clone();
    one_op.flush_instruction_budget = 1;
    let mut queue = BatchQueue::from_state(one_op, queue.to_state()).unwrap();
    assert_eq!(
        queue.flush(&conn, &CountingMeter::new(1)).unwrap().executed,
        1
    );
    assert_eq!(queue.next_due(clock.now_ns()), Some(10_400 + 1_000));
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(queue.next_due(clock.now_ns()), None);
}

#[test]
fn next_due_saturates() {
    let mut queue = BatchQueue::new(Config {
        max_delay_ns: u64::MAX,
        ..config(5, 5)
    })
    .unwrap();
    queue.submit(user(1), 5).unwrap();
    assert_eq!(queue.next_due(5), Some(u64::MAX));
}

#[test]
fn flush_takes_everything_pending_in_one_transaction() {
    let conn = open_db();
    // One meter read per op: coalescing off.
    let mut queue = BatchQueue::new(Config {
        coalesce_rows: 0,
        ..config(2, 10)
    })
    .unwrap();
    for i in 0..7 {
        queue.submit(user(i), 0).unwrap();
    }
    let meter = CountingMeter::new(1);
    let report = queue.flush(&conn, &meter).unwrap();
    assert_eq!(
        report,
        FlushReport {
            executed: 7,
            committed: 7,
            failed: 0,
            interrupted: 0,
            coalesced: 0,
            remaining: 0,
            more_due: false,
            // Reads: start, before ops 2..=7, end.
            instructions: 7,
            capped: false,
        }
    );
    assert_eq!(meter.reads(), 8);
    assert_eq!(count(&conn, "users"), 7);
    assert_eq!(queue.status(7), committed(1, 7));
}

#[test]
fn budget_stops_between_ops_and_leaves_the_rest_queued_in_order() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        flush_instruction_budget: 250,
        coalesce_rows: 0,
        ..config(100, 100)
    })
    .unwrap();
    for i in 0..10 {
        queue.submit(user(i), 0).unwrap();
    }
    // Reads return 0, 100, 200, 300: op 1 runs unchecked, ops 2 and 3 start at 100 and 200
    // used, op 4 would start at 300 >= 250.
    let meter = CountingMeter::new(100);
    let report = queue.flush(&conn, &meter).unwrap();
    assert_eq!(
        report,
        FlushReport {
            executed: 3,
            committed: 3,
            failed: 0,
            interrupted: 0,
            coalesced: 0,
            remaining: 7,
            more_due: true,
            instructions: 400,
            capped: false,
        }
    );
    assert_eq!(meter.reads(), 5);
    assert_eq!(pending_tickets(&queue), (4..=10).collect::<Vec<_>>());
    assert_eq!(queue.status(3), committed(1, 3));
    assert_eq!(queue.status(4), OpStatus::Pending);
    assert_eq!(count(&conn, "users"), 3);
    let stats = queue.stats();
    assert_eq!(
        (stats.last_flush_ops, stats.last_flush_instructions),
        (3, 400)
    );
    // The rest follows, in order.
    let report = queue.flush(&conn, &CountingMeter::new(100)).unwrap();
    assert_eq!((report.executed, report.remaining), (3, 4));
    let report = queue.flush(&conn, &CountingMeter::new(100)).unwrap();
    assert_eq!((report.executed, report.remaining), (3, 1));
    let report = queue.flush(&conn, &CountingMeter::new(100)).unwrap();
    assert_eq!(
        (report.executed, report.remaining, report.more_due),
        (1, 0, false)
    );
    let names: Vec<String> = conn
        .prepare("SELECT username FROM users ORDER BY user_id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        names,
        (0..10).map(|i| format!("user{i}")).collect::<Vec<_>>()
    );
}

#[test]
fn an_exhausted_budget_still_runs_one_op() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        flush_instruction_budget: 1,
        ..config(10, 10)
    })
    .unwrap();
    queue.submit(user(1), 0).unwrap();
    queue.submit(user(2), 0).unwrap();
    let meter = CountingMeter::new(1_000_000);
    let report = queue.flush(&conn, &meter).unwrap();
    assert_eq!(
        (report.executed, report.remaining, report.more_due),
        (1, 1, true)
    );
}

#[test]
fn budget_op_count_formula() {
    // min(n, max(1, ceil(budget / step))) ops per flush.
    for (n, budget, step, expected) in [
        (10, 250, 100, 3),
        (10, 300, 100, 3),
        (10, 301, 100, 4),
        (10, 1, 100, 1),
        (10, 5, 0, 10),
        (2, 1_000, 1, 2),
    ] {
        let conn = open_db();
        let mut queue = BatchQueue::new(Config {
            flush_instruction_budget: budget,
            coalesce_rows: 0,
            ..config(10, 10)
        })
        .unwrap();
        for i in 0..n {
            queue.submit(user(i), 0).unwrap();
        }
        let report = queue.flush(&conn, &CountingMeter::new(step)).unwrap();
        assert_eq!(
            report.executed, expected,
            "n={n} budget={budget} step={step}"
        );
    }
}

#[test]
fn empty_flush_touches_nothing() {
    let conn = open_db();
    conn.execute_batch("BEGIN").unwrap();
    let mut queue = BatchQueue::new(config(1, 1)).unwrap();
    let meter = CountingMeter::new(1);
    assert_eq!(queue.flush(&conn, &meter).unwrap(), FlushReport::default());
    assert_eq!(meter.reads(), 0);
    assert_eq!(queue.stats().flushes, 0);
    conn.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn outcomes_are_evicted_oldest_first() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        outcome_capacity: 2,
        ..config(10, 10)
    })
    .unwrap();
    for i in 0..3 {
        queue.submit(user(i), 0).unwrap();
    }
    queue.flush(&conn, &CountingMeter::new(0)).unwrap();
    assert_eq!(
        queue.status(1),
        OpStatus::Evicted {
            committed: Some(true)
        }
    );
    assert_eq!(queue.status(2), committed(1, 2));
    assert_eq!(queue.status(3), committed(1, 3));
    queue.submit(user(0), 0).unwrap();
    assert_eq!(queue.status(4), OpStatus::Pending);
    queue.flush(&conn, &CountingMeter::new(0)).unwrap();
    assert_eq!(
        queue.status(2),
        OpStatus::Evicted {
            committed: Some(true)
        }
    );
    assert_eq!(queue.status(3), committed(1, 3));
    assert_eq!(
        queue.status(4),
        failed(UNIQUE, "UNIQUE constraint failed: users.email")
    );
    assert_eq!(queue.status(5), OpStatus::Unknown);
}

#[test]
fn zero_outcome_capacity_evicts_at_once() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        outcome_capacity: 0,
        ..config(10, 10)
    })
    .unwrap();
    queue.submit(user(1), 0).unwrap();
    queue.flush(&conn, &CountingMeter::new(0)).unwrap();
    assert_eq!(
        queue.status(1),
        OpStatus::Evicted {
            committed: Some(true)
        }
    );
}

#[test]
fn stats_are_exact() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        flush_instruction_budget: 2,
        ..config(3, 4)
    })
    .unwrap();
    queue.submit(user(1), 0).unwrap();
    queue.submit(user(1), 0).unwrap(); // duplicate email: fails
    queue.submit(WriteOp::single("BAD SQL", vec![]), 0).unwrap();
    queue.submit(user(2), 0).unwrap();
    assert!(queue.submit(user(3), 0).is_err());
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(
        (report.executed, report.committed, report.failed),
        (2, 1, 1)
    );
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(
        (report.executed, report.committed, report.failed),
        (2, 1, 1)
    );
    assert_eq!(
        queue.stats(),
        Stats {
            pending: 0,
            submitted: 4,
            committed: 2,
            failed: 2,
            rejected: 1,
            flushes: 2,
            last_flush_ops: 2,
            last_flush_instructions: 2,
            flush_errors: 0,
            capped_flushes: 0,
            interrupted: 0,
            last_error: None,
        }
    );
}

#[test]
fn begin_failure_leaves_the_queue_unchanged() {
    let conn = open_db();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    for i in 0..3 {
        queue.submit(user(i), 0).unwrap();
    }
    let before = queue.to_state();
    conn.execute_batch("BEGIN").unwrap();
    let error = queue.flush(&conn, &CountingMeter::new(1)).unwrap_err();
    assert!(matches!(error, FlushError::Begin(_)), "{error:?}");
    conn.execute_batch("ROLLBACK").unwrap();
    let after = queue.to_state();
    assert_eq!(after.pending, before.pending);
    assert_eq!(after.outcomes, before.outcomes);
    assert_eq!(
        after.stats,
        Stats {
            flush_errors: 1,
            last_error: Some(
                "BEGIN failed: cannot start a transaction within a transaction".into()
            ),
            ..before.stats
        }
    );
    assert_eq!(queue.status(1), OpStatus::Pending);
    // Nothing was lost: the next flush applies all of it.
    assert_eq!(
        queue
            .flush(&conn, &CountingMeter::new(1))
            .unwrap()
            .committed,
        3
    );
    assert_eq!(count(&conn, "users"), 3);
}

#[test]
fn commit_failure_rolls_back_and_leaves_the_queue_unchanged() {
    let conn = open_db();
    conn.execute_batch(
        "CREATE TABLE deferred (user_id INTEGER REFERENCES users(user_id) DEFERRABLE INITIALLY DEFERRED);",
    )
    .unwrap();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    queue.submit(user(1), 0).unwrap();
    queue
        .submit(
            WriteOp::single("INSERT INTO deferred VALUES (42)", vec![]),
            0,
        )
        .unwrap();
    let before = queue.to_state();
    let error = queue.flush(&conn, &CountingMeter::new(1)).unwrap_err();
    assert!(matches!(error, FlushError::Commit(_)), "{error:?}");
    assert!(conn.is_autocommit());
    assert_eq!(count(&conn, "users"), 0);
    assert_eq!(queue.to_state().pending, before.pending);
    assert_eq!(queue.status(1), OpStatus::Pending);
    assert_eq!(queue.stats().flush_errors, 1);
    assert_eq!(queue.stats().flushes, 0);
    assert_eq!(
        queue.stats().last_error.as_deref(),
        Some("COMMIT failed: FOREIGN KEY constraint failed")
    );
    assert_eq!(queue.commit_limit(), Some(1));
}

#[test]
fn an_op_that_cannot_commit_is_isolated_and_fails_alone() {
    let conn = open_db();
    conn.execute_batch(
        "CREATE TABLE deferred (user_id INTEGER REFERENCES users(user_id) DEFERRABLE INITIALLY DEFERRED);",
    )
    .unwrap();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    for i in 1..=5 {
        queue.submit(user(i), 0).unwrap();
    }
    // Ticket 6 violates a deferred constraint: every COMMIT that includes it fails.
    let poison = WriteOp::single("INSERT INTO deferred VALUES (42)", vec![]);
    queue.submit(poison, 0).unwrap();
    for i in 7..=8 {
        queue.submit(user(i), 0).unwrap();
    }
    // 8 ops fail to commit; then 4 (tickets 1..=4) commit, and the limit is lifted.
    assert!(queue.flush(&conn, &CountingMeter::new(1)).is_err());
    assert_eq!(queue.commit_limit(), Some(4));
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!((report.committed, report.remaining), (4, 4));
    assert_eq!(queue.commit_limit(), None);
    // Tickets 5..=8 fail (limit 2), then 5..=6 fail (limit 1), then 5 commits alone.
    assert!(queue.flush(&conn, &CountingMeter::new(1)).is_err());
    assert!(queue.flush(&conn, &CountingMeter::new(1)).is_err());
    assert_eq!(queue.commit_limit(), Some(1));
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!((report.committed, report.remaining), (1, 3));
    // Ticket 6, alone, cannot commit: it fails and leaves the queue; nothing else is lost.
    queue.flush(&conn, &CountingMeter::new(1)).unwrap_err();
    assert_eq!(queue.commit_limit(), Some(1));
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(
        (report.executed, report.failed, report.remaining),
        (1, 1, 2)
    );
    assert_eq!(
        queue.status(6),
        failed(FOREIGN_KEY, "COMMIT failed: FOREIGN KEY constraint failed")
    );
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!((report.committed, report.remaining), (2, 0));
    assert_eq!(count(&conn, "users"), 7);
    for ticket in [1, 2, 3, 4, 5, 7, 8] {
        assert!(
            matches!(
                queue.status(ticket),
                OpStatus::Done(Outcome::Committed { .. })
            ),
            "ticket {ticket}"
        );
    }
}

#[test]
fn unit_savepoint_rollback_in_a_flush() {
    let conn = open_db();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    queue.submit(user(1), 0).unwrap();
    queue
        .submit(
            WriteOp::Unit(vec![
                insert_user_stmt("u2", "2@x"),
                Statement::new(crate::testing::INSERT_ORDER, vec![2.into(), 1.0.into()]),
                Statement::new(crate::testing::INSERT_ORDER, vec![99.into(), 1.0.into()]),
            ]),
            0,
        )
        .unwrap();
    queue.submit(insert_order(1, 4.0), 0).unwrap();
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!((report.committed, report.failed), (2, 1));
    assert_eq!(
        queue.status(2),
        failed(FOREIGN_KEY, "statement 2: FOREIGN KEY constraint failed")
    );
    assert_eq!(queue.status(3), committed(1, 1));
    assert_eq!((count(&conn, "users"), count(&conn, "orders")), (1, 1));
}

#[test]
fn transaction_rollback_in_a_flush_reapplies_earlier_ops() {
    let conn = open_db();
    let reference = open_db();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    let ops = vec![
        user(1),
        insert_order(1, 5.0),
        WriteOp::single(
            "INSERT OR ROLLBACK INTO users (username, email) VALUES ('r', '1@x')",
            vec![],
        ),
        user(2),
        insert_order(2, 9_999_999.0), // RAISE(ROLLBACK)
        insert_order(2, 6.0),
    ];
    for op in &ops {
        queue.submit(op.clone(), 0).unwrap();
    }
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(
        (report.executed, report.committed, report.failed),
        (6, 4, 2)
    );
    for (i, op) in ops.iter().enumerate() {
        assert_eq!(
            queue.status(i as Ticket + 1),
            OpStatus::Done(crate::execute_autocommit(&reference, op))
        );
    }
    assert_eq!(
        queue.status(3),
        failed(UNIQUE, "UNIQUE constraint failed: users.email")
    );
    assert_eq!(queue.status(5), failed(TRIGGER, "amount over limit"));
    assert_eq!(queue.status(6), committed(1, 2));
    assert_eq!(dump(&conn), dump(&reference));
}

#[test]
fn state_round_trips_through_serde_json() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        flush_instruction_budget: 1,
        ..config(10, 10)
    })
    .unwrap();
    queue.submit(user(1), 10).unwrap();
    queue.submit(user(1), 20).unwrap();
    queue
        .submit(
            WriteOp::Unit(vec![
                insert_user_stmt("b", "b@x"),
                insert_user_stmt("c", "c@x"),
            ]),
            30,
        )
        .unwrap();
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    let state = queue.to_state();
    assert_eq!(state.next_ticket, 4);
    assert_eq!(state.pending.len(), 1);
    assert_eq!(state.pending[0].enqueued_ns, 30);
    assert_eq!(state.outcomes.len(), 2);
    let json = serde_json::to_vec(&state).unwrap();
    let decoded: QueueState = serde_json::from_slice(&json).unwrap();
    assert_eq!(decoded, state);
    let mut restored = BatchQueue::from_state(queue.config().clone(), decoded).unwrap();
    assert_eq!(restored.stats(), queue.stats());
    for ticket in 0..6 {
        assert_eq!(restored.status(ticket), queue.status(ticket));
    }
    assert_eq!(restored.next_due(0), Some(30 + 1_000));
    // It carries on where the original left off.
    assert_eq!(restored.submit(user(9), 40).unwrap().ticket, 4);
    let report = restored.flush(&conn, &CountingMeter::new(0)).unwrap();
    assert_eq!(report.executed, 2);
    assert_eq!(restored.status(3), committed(2, 3));
    assert_eq!(restored.stats().submitted, 4);
}

#[test]
fn from_state_keeps_every_pending_op_and_trims_outcomes() {
    let conn = open_db();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    for i in 0..4 {
        queue.submit(user(i), 0).unwrap();
    }
    queue.flush(&conn, &CountingMeter::new(0)).unwrap();
    for i in 4..10 {
        queue.submit(user(i), 0).unwrap();
    }
    let smaller = Config {
        max_pending: 3,
        flush_size: 2,
        outcome_capacity: 1,
        ..config(2, 3)
    };
    let mut restored = BatchQueue::from_state(smaller, queue.to_state()).unwrap();
    assert_eq!(restored.len(), 6);
    assert_eq!(
        restored.status(3),
        OpStatus::Evicted {
            committed: Some(true)
        }
    );
    assert_eq!(restored.status(4), committed(1, 4));
    assert_eq!(
        restored.submit(user(10), 0).unwrap_err(),
        SubmitError::QueueFull { capacity: 3 }
    );
    assert_eq!(
        restored
            .flush(&conn, &CountingMeter::new(0))
            .unwrap()
            .committed,
        6
    );
}

#[test]
fn from_state_rejects_inconsistent_states() {
    let conn = open_db();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    for i in 0..4 {
        queue.submit(user(i), 0).unwrap();
    }
    queue.flush(&conn, &CountingMeter::new(0)).unwrap();
    queue.submit(user(5), 0).unwrap();
    queue.submit(user(6), 0).unwrap();
    let good = queue.to_state();
    assert!(BatchQueue::from_state(config(10, 10), good.clone()).is_ok());
    let mut cases: Vec<QueueState> = Vec::new();
    cases.push(QueueState {
        next_ticket: 0,
        ..good.clone()
    });
    cases.push(QueueState {
        next_ticket: 6,
        ..good.clone()
    });
    let mut swapped = good.clone();
    swapped.pending.swap(0, 1);
    cases.push(swapped);
    let mut zero = good.clone();
    zero.pending[0].ticket = 0;
    zero.outcomes.clear();
    cases.push(zero);
    let mut outcomes_unordered = good.clone();
    outcomes_unordered.outcomes.swap(0, 1);
    cases.push(outcomes_unordered);
    let mut overlap = good.clone();
    overlap.pending[0].ticket = 4;
    cases.push(overlap);
    for state in cases {
        assert!(
            matches!(
                BatchQueue::from_state(config(10, 10), state.clone()),
                Err(ConfigError::InvalidState { .. })
            ),
            "{state:?}"
        );
    }
    assert_eq!(
        BatchQueue::from_state(
            Config {
                max_pending: 0,
                ..config(1, 1)
            },
            good
        )
        .unwrap_err(),
        ConfigError::ZeroMaxPending
    );
}

#[test]
fn submit_and_report_types_serialize() {
    let report = FlushReport {
        executed: 1,
        committed: 1,
        ..FlushReport::default()
    };
    let json = serde_json::to_string(&report).unwrap();
    assert_eq!(serde_json::from_str::<FlushReport>(&json).unwrap(), report);
    let status = committed(1, 2);
    let json = serde_json::to_string(&status).unwrap();
    assert_eq!(serde_json::from_str::<OpStatus>(&json).unwrap(), status);
}

/// A write that changes nothing and runs about 200,000 virtual-machine operations.
const HEAVY: &str = "INSERT INTO users (username, email) SELECT 'never', 'never@x' FROM \
    (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) \
    SELECT x FROM c) WHERE x < 0";

#[test]
fn a_heavy_op_never_blocks_the_queue() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        flush_instruction_budget: 50,
        ..config(100, 100)
    })
    .unwrap();
    // A meter that only moves while statements run (1 per progress-handler read, every 1,000
    // virtual-machine operations): ordinary ops cost 0 or 1, the heavy op about 200.
    let meter = || CountingMeter::with_statement_step(0, 1);
    for i in 1..=3 {
        queue.submit(user(i), 0).unwrap();
    }
    queue.submit(WriteOp::single(HEAVY, vec![]), 0).unwrap();
    for i in 5..=6 {
        queue.submit(user(i), 0).unwrap();
    }
    // Flush 1: tickets 1..=3 commit; the heavy op, interrupted after others ran, stays queued
    // first with the ops behind it.
    let report = queue.flush(&conn, &meter()).unwrap();
    assert_eq!(
        (
            report.executed,
            report.committed,
            report.interrupted,
            report.remaining
        ),
        (3, 3, 0, 3)
    );
    assert!(report.more_due);
    assert_eq!(pending_tickets(&queue), vec![4, 5, 6]);
    assert_eq!(count(&conn, "users"), 3);
    // Flush 2: alone at the start with the whole limit, it is interrupted again and fails; the
    // flush has used its budget, so nothing else starts.
    let report = queue.flush(&conn, &meter()).unwrap();
    assert_eq!(
        (
            report.executed,
            report.failed,
            report.interrupted,
            report.remaining
        ),
        (1, 1, 1, 2)
    );
    let error = "interrupted: the op was still running after 100 instructions, alone at the start of a flush (2 × flush_instruction_budget), and was rolled back";
    assert_eq!(
        queue.status(4),
        failed(rusqlite::ffi::SQLITE_INTERRUPT, error)
    );
    // Flush 3: the rest commits.
    let report = queue.flush(&conn, &meter()).unwrap();
    assert_eq!((report.committed, report.remaining), (2, 0));
    assert_eq!(count(&conn, "users"), 5);
    let stats = queue.stats();
    assert_eq!(
        (
            stats.committed,
            stats.failed,
            stats.interrupted,
            stats.flush_errors
        ),
        (5, 1, 1, 0)
    );
    assert_eq!(stats.last_error, Some(format!("ticket 4: {error}")));
}

#[test]
fn a_heavy_op_first_in_line_fails_in_the_first_flush() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        flush_instruction_budget: 50,
        ..config(100, 100)
    })
    .unwrap();
    queue.submit(WriteOp::single(HEAVY, vec![]), 0).unwrap();
    queue.submit(user(1), 0).unwrap();
    let meter = CountingMeter::with_statement_step(0, 1);
    let report = queue.flush(&conn, &meter).unwrap();
    assert_eq!(
        (report.executed, report.interrupted, report.remaining),
        (1, 1, 1)
    );
    // It was stopped at its limit (plus at most one period), not run to the end.
    assert!(
        meter.statement_reads() <= 101,
        "{}",
        meter.statement_reads()
    );
    let report = queue
        .flush(&conn, &CountingMeter::with_statement_step(0, 1))
        .unwrap();
    assert_eq!(report.committed, 1);
    // With a budget that suffices, the same op commits (changing nothing).
    queue
        .reconfigure(Config {
            flush_instruction_budget: 1_000,
            ..config(100, 100)
        })
        .unwrap();
    let ticket = queue
        .submit(WriteOp::single(HEAVY, vec![]), 0)
        .unwrap()
        .ticket;
    queue
        .flush(&conn, &CountingMeter::with_statement_step(0, 1))
        .unwrap();
    assert_eq!(queue.status(ticket), committed(0, 0));
}

#[test]
fn the_queue_is_bounded_in_bytes() {
    let conn = open_db();
    let mut queue = BatchQueue::new(Config {
        max_pending_bytes: 200,
        ..config(10, 10)
    })
    .unwrap();
    // INSERT_USER is 51 bytes of SQL: 51 + 16 + two short texts.
    let op = insert_user("ab", "c@x");
    assert_eq!(op.size_bytes(), 51 + 16 + 2 + 3);
    assert!(queue.submit(op.clone(), 0).is_ok());
    assert!(queue.submit(op.clone(), 0).is_ok());
    assert_eq!(queue.pending_bytes(), 144);
    assert_eq!(
        queue.submit(op.clone(), 0),
        Err(SubmitError::QueueBytesFull {
            pending_bytes: 144,
            op_bytes: 72,
            capacity_bytes: 200
        })
    );
    let huge = insert_user(&"x".repeat(300), "h@x");
    assert_eq!(
        queue.submit(huge, 0),
        Err(SubmitError::OpTooLarge {
            op_bytes: 51 + 16 + 300 + 3,
            capacity_bytes: 200
        })
    );
    assert_eq!(queue.stats().rejected, 2);
    // A flush frees the bytes, and a restored queue counts them again.
    let restored = BatchQueue::restore(&queue.save(Vec::new()).unwrap()).unwrap();
    assert_eq!(restored.pending_bytes(), 144);
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(queue.pending_bytes(), 0);
    assert!(queue.submit(op, 0).is_ok());
}

#[test]
fn kept_error_texts_are_bounded() {
    let conn = open_db();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    // SQLite quotes the whole statement in a syntax error.
    let sql = format!("INSRT INTO users VALUES ('{}é')", "x".repeat(5_000));
    let ticket = queue
        .submit(WriteOp::single(sql, vec![]), 0)
        .unwrap()
        .ticket;
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    let OpStatus::Done(Outcome::Failed(OpError {
        message: error,
        code,
    })) = queue.status(ticket)
    else {
        panic!("expected a failure")
    };
    assert_eq!(code, rusqlite::ffi::SQLITE_ERROR);
    assert!(
        error.len() <= crate::queue::MAX_ERROR_BYTES,
        "{}",
        error.len()
    );
    assert!(error.starts_with("near \"INSRT\": syntax error") && error.ends_with('…'));
}

#[test]
fn flush_at_most_and_fail_first() {
    let conn = open_db();
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    for i in 1..=5 {
        queue.submit(user(i), 0).unwrap();
    }
    let report = queue
        .flush_at_most(&conn, &CountingMeter::new(1), 2)
        .unwrap();
    assert_eq!((report.executed, report.remaining), (2, 3));
    // 0 still executes one op: every flush makes progress.
    let report = queue
        .flush_at_most(&conn, &CountingMeter::new(1), 0)
        .unwrap();
    assert_eq!(report.executed, 1);
    assert_eq!(queue.fail_first("it made every flush trap"), Some(4));
    assert_eq!(
        queue.status(4),
        failed(rusqlite::ffi::SQLITE_ABORT, "it made every flush trap")
    );
    assert_eq!(pending_tickets(&queue), vec![5]);
    let stats = queue.stats();
    assert_eq!((stats.committed, stats.failed), (3, 1));
    assert_eq!(
        stats.last_error.as_deref(),
        Some("ticket 4: it made every flush trap")
    );
    assert_eq!(queue.pending_bytes(), user(5).size_bytes());
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(queue.fail_first("nothing left"), None);
    assert_eq!(count(&conn, "users"), 4);
}

/// The coalescer keeps its table checks from one flush to the next; a schema change made
/// between flushes (outside the queue, in the temp schema, or by an op inside a batch) must
/// be seen before the next chunk. Each flush is compared, op by op, with autocommit on a
/// second database that goes through the same schema changes.
#[test]
fn coalescing_sees_every_schema_change_between_and_inside_flushes() {
    const SCHEMA: &str = "CREATE TABLE t (id INTEGER PRIMARY KEY, a INT);";
    // Inserts into a table with triggers are not coalesced (see the coalesce module), also when
    // the trigger writes nothing that the check of a chunk's rowids would notice.
    const TRIGGER: &str = "CREATE TRIGGER positive AFTER INSERT ON t WHEN NEW.a < 0
                           BEGIN SELECT RAISE(ABORT, 'negative'); END;";
    const TEMP_TRIGGER: &str = "CREATE TEMP TRIGGER positive_temp AFTER INSERT ON main.t
                                WHEN NEW.a < 0 BEGIN SELECT RAISE(ABORT, 'negative'); END;";
    // A conflict clause in the table: `INSERT OR FAIL` would override it, so that a duplicate
    // fails in a chunk where it is ignored alone.
    const IGNORE_DUPLICATES: &str = "DROP TABLE t;
        CREATE TABLE t (id INTEGER PRIMARY KEY, a INT UNIQUE ON CONFLICT IGNORE);";
    let batched = rusqlite::Connection::open_in_memory().unwrap();
    let reference = rusqlite::Connection::open_in_memory().unwrap();
    for conn in [&batched, &reference] {
        conn.execute_batch(SCHEMA).unwrap();
    }
    let insert = |a: i64| WriteOp::single("INSERT INTO t (a) VALUES (?1)", vec![a.into()]);
    // Five inserts (one value twice).
    let five = || [1, 2, 2, 3, 4].map(insert).to_vec();
    let mut queue = BatchQueue::new(config(1_000, 1_000)).unwrap();
    let mut flush = |ops: Vec<WriteOp>, between: Option<&str>| -> usize {
        if let Some(sql) = between {
            for conn in [&batched, &reference] {
                conn.execute_batch(sql).unwrap();
            }
        }
        let tickets: Vec<_> = ops
            .iter()
            .map(|op| queue.submit(op.clone(), 0).unwrap().ticket)
            .collect();
        let report = queue.flush(&batched, &CountingMeter::new(1)).unwrap();
        assert_eq!(report.executed, ops.len());
        for (ticket, op) in tickets.into_iter().zip(&ops) {
            let alone = crate::executor::execute_autocommit(&reference, op);
            assert_eq!(queue.status(ticket), OpStatus::Done(alone), "{op:?}");
        }
        let rows = |conn: &rusqlite::Connection| -> Vec<(i64, i64)> {
            conn.prepare("SELECT id, a FROM t ORDER BY id")
                .unwrap()
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(rows(&batched), rows(&reference));
        report.coalesced
    };
    // No trigger: the first op runs alone, the next four as one chunk.
    assert_eq!(flush(five(), None), 4);
    // A trigger created between flushes, outside the queue.
    assert_eq!(flush(five(), Some(TRIGGER)), 0);
    assert_eq!(flush(five(), Some("DROP TRIGGER positive;")), 4);
    // In the temp schema (main's schema_version does not move).
    assert_eq!(flush(five(), Some(TEMP_TRIGGER)), 0);
    assert_eq!(flush(five(), Some("DROP TRIGGER temp.positive_temp;")), 4);
    // By an op in the middle of a batch: two ops coalesce before it, none after it.
    let mut ops = vec![insert(5), insert(6), insert(7)];
    ops.push(WriteOp::single(TRIGGER, vec![]));
    ops.extend(five());
    assert_eq!(flush(ops, None), 2);
    // Dropped by an op of the batch: the chunk after it coalesces again.
    let mut ops = vec![insert(8), WriteOp::single("DROP TRIGGER positive", vec![])];
    ops.extend(five());
    assert_eq!(flush(ops, None), 4);
    // The same table name with a conflict clause: no chunk, and the duplicate is ignored.
    assert_eq!(flush(five(), Some(IGNORE_DUPLICATES)), 0);
}

/// A file database and a second connection that holds a read transaction on it while `hold`
/// is set: the queue's `COMMIT` then fails with `SQLITE_BUSY`, a failure of no op.
struct Contended {
    conn: rusqlite::Connection,
    reader: rusqlite::Connection,
    path: std::path::PathBuf,
}

impl Contended {
    fn new(name: &str) -> Contended {
        let path =
            std::env::temp_dir().join(format!("batch_core_{name}_{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(crate::testing::SCHEMA).unwrap();
        conn.busy_timeout(std::time::Duration::ZERO).unwrap();
        let reader = rusqlite::Connection::open(&path).unwrap();
        Contended { conn, reader, path }
    }

    fn hold(&self) {
        self.reader
            .execute_batch("BEGIN; SELECT count(*) FROM users;")
            .unwrap();
    }

    fn release(&self) {
        self.reader.execute_batch("COMMIT").unwrap();
    }
}

impl Drop for Contended {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A `COMMIT` that fails for a reason of no op (here a lock another connection holds; on a
/// canister a full or read-only database) fails no op, however often and with however many or
/// few ops queued: the queue waits unchanged and commits everything once it can.
#[test]
fn a_commit_failing_for_no_op_fails_no_op_however_long_it_lasts() {
    let db = Contended::new("commit_busy");
    for ops in [1usize, 3] {
        let mut queue = BatchQueue::new(config(10, 10)).unwrap();
        for i in 0..ops {
            queue.submit(user(i), 0).unwrap();
        }
        let before = queue.to_state();
        db.hold();
        for _ in 0..20 {
            let error = queue.flush(&db.conn, &CountingMeter::new(1)).unwrap_err();
            match error {
                FlushError::Commit(e) => assert_eq!(error_code(&e), 5, "{e}"),
                other => panic!("{other:?}"),
            }
            assert_eq!(queue.commit_limit(), None, "no op is suspected");
        }
        assert_eq!(queue.to_state().pending, before.pending);
        let stats = queue.stats();
        assert_eq!((stats.failed, stats.flush_errors), (0, 20));
        assert_eq!(
            stats.last_error.as_deref(),
            Some("COMMIT failed: database is locked")
        );
        db.release();
        let report = queue.flush(&db.conn, &CountingMeter::new(1)).unwrap();
        assert_eq!(
            (report.committed, report.failed, report.remaining),
            (ops, 0, 0)
        );
        db.conn.execute_batch("DELETE FROM users").unwrap();
    }
    // The same on main failed the single op with "COMMIT failed: database is locked".
}

/// Calls of `vary()` so far, and the call that returns a large value.
static VARY_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Registers `vary()`: 10 on every call except the second, which returns 3,000 (an op whose
/// cost varies: 300 times more virtual-machine operations the second time it runs).
fn register_vary(conn: &rusqlite::Connection) {
    use rusqlite::functions::FunctionFlags;
    VARY_CALLS.store(0, std::sync::atomic::Ordering::SeqCst);
    conn.create_scalar_function("vary", 0, FunctionFlags::SQLITE_UTF8, |_| {
        let call = VARY_CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(if call == 1 { 3_000i64 } else { 10 })
    })
    .unwrap();
}

/// An op whose cost is `vary()` rows of a recursive CTE (`vary()` is called once per
/// execution); it inserts one user.
const VARYING: &str = "INSERT INTO users (username, email) SELECT 'varying', 'v' || count(*) || '@x' \
    FROM (WITH RECURSIVE n(v) AS MATERIALIZED (SELECT vary()), \
    c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c, n WHERE x < n.v) SELECT x FROM c)";

/// The re-application after an interrupt keeps the flush's deadline: an op that costs more the
/// second time cannot push the flush past 3 × the budget. The flush is then rolled back and
/// leaves every op queued (no op gets an outcome it did not earn), and the next flush runs
/// fewer ops.
#[test]
fn re_application_keeps_the_flush_within_three_budgets() {
    let conn = open_db();
    register_vary(&conn);
    let budget = 50;
    let mut queue = BatchQueue::new(Config {
        flush_instruction_budget: budget,
        coalesce_rows: 0,
        ..config(100, 100)
    })
    .unwrap();
    for i in 1..=2 {
        queue.submit(user(i), 0).unwrap();
    }
    queue.submit(WriteOp::single(VARYING, vec![]), 0).unwrap();
    queue.submit(WriteOp::single(HEAVY, vec![]), 0).unwrap();
    queue.submit(user(5), 0).unwrap();
    let previous = crate::executor::TEST_PROGRESS_PERIOD_OPS.with(|p| p.replace(10));
    let meter = || CountingMeter::with_statement_step(0, 1);

    // Flush 1: the heavy op is interrupted at 2 × budget; re-applying the varying op (now
    // 300 times as long) reaches 3 × budget: rolled back, nothing executed.
    let m = meter();
    let report = queue.flush(&conn, &m).unwrap();
    assert_eq!(
        report,
        FlushReport {
            remaining: 5,
            more_due: true,
            instructions: report.instructions,
            capped: true,
            ..FlushReport::default()
        }
    );
    // The guard reads the meter every 10 operations: it overshoots by at most one read.
    assert!(
        (3 * budget..=3 * budget + 1).contains(&m.peek()),
        "{}",
        m.peek()
    );
    assert_eq!(count(&conn, "users"), 0);
    assert_eq!(pending_tickets(&queue), vec![1, 2, 3, 4, 5]);
    assert_eq!(queue.commit_limit(), Some(1));
    let stats = queue.stats();
    assert_eq!(
        (stats.capped_flushes, stats.failed, stats.flushes),
        (1, 0, 0)
    );
    assert_eq!(
        stats.last_error.as_deref(),
        Some(
            "a flush reached its limit of 150 instructions while re-applying 3 ops after an interrupt and was rolled back; every op stays queued and the next flush runs at most 1"
        )
    );
    // Flush 2: one op commits. Flush 3: the next and the varying op (cheap again) commit, the
    // heavy op is left behind them. Flush 4: the heavy op fails alone. Flush 5: the last op.
    let report = queue.flush(&conn, &meter()).unwrap();
    assert_eq!((report.committed, report.remaining), (1, 4));
    let report = queue.flush(&conn, &meter()).unwrap();
    assert_eq!((report.committed, report.remaining), (2, 2));
    let report = queue.flush(&conn, &meter()).unwrap();
    assert_eq!((report.interrupted, report.remaining), (1, 1));
    let report = queue.flush(&conn, &meter()).unwrap();
    assert_eq!((report.committed, report.remaining), (1, 0));
    crate::executor::TEST_PROGRESS_PERIOD_OPS.with(|p| p.set(previous));
    for ticket in [1, 2, 3, 5] {
        assert!(
            matches!(
                queue.status(ticket),
                OpStatus::Done(Outcome::Committed { .. })
            ),
            "ticket {ticket}: {:?}",
            queue.status(ticket)
        );
    }
    assert_eq!(
        queue.status(4).clone(),
        failed(
            rusqlite::ffi::SQLITE_INTERRUPT,
            "interrupted: the op was still running after 100 instructions, alone at the start of a flush (2 × flush_instruction_budget), and was rolled back"
        )
    );
}

/// A client batch re-applied past its total limit fails the re-applied op that ran long, with
/// that limit in its error, and commits the rest: the batch never passes 3 × its budget.
#[test]
fn a_client_batch_is_bounded_by_three_budgets_too() {
    let conn = open_db();
    register_vary(&conn);
    let budget = crate::Budget::new(CountingMeter::with_statement_step(0, 1), 50);
    let ops = vec![
        user(1),
        WriteOp::single(VARYING, vec![]),
        WriteOp::single(HEAVY, vec![]),
    ];
    let previous = crate::executor::TEST_PROGRESS_PERIOD_OPS.with(|p| p.replace(100));
    let outcomes = crate::execute_batch_within(&conn, &ops, &budget).unwrap();
    crate::executor::TEST_PROGRESS_PERIOD_OPS.with(|p| p.set(previous));
    // The heavy op is interrupted at 100. The re-application then runs until 150: the varying
    // op (300 times as long now) is interrupted there; the next re-application has no time
    // left, and the user's insert is interrupted at its first meter read (SQLite counts a
    // statement's operations over all its runs). Nothing starts after the budget, so the heavy
    // op, whose outcome came from a state that is gone, is not executed again.
    let interrupted = Outcome::Failed(OpError { code: rusqlite::ffi::SQLITE_INTERRUPT, message: "interrupted: the batch reached its limit of 150 instructions while this op ran; the op was rolled back (run it alone or in a smaller batch)".into() });
    assert_eq!(
        outcomes,
        vec![interrupted, Outcome::NotExecuted, Outcome::NotExecuted]
    );
    assert_eq!(count(&conn, "users"), 0);
    assert!(budget.meter.peek() <= 152, "{}", budget.meter.peek());
}

#[test]
fn outcomes_belong_to_their_submitter() {
    let conn = open_db();
    let alice = Owner::of(b"alice");
    let bob = Owner::of(b"bob");
    let mut queue = BatchQueue::new(config(10, 10)).unwrap();
    let a = queue.submit_as(user(1), 0, alice).unwrap().ticket;
    let b = queue.submit_as(user(1), 0, bob).unwrap().ticket;
    assert_eq!(queue.status_for(a, alice), OpStatus::Pending);
    assert_eq!(queue.status_for(a, bob), OpStatus::NotYours);
    assert_eq!(queue.owner_of(b), Some(bob));
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(queue.status_for(a, alice), committed(1, 1));
    assert_eq!(queue.status_for(a, bob), OpStatus::NotYours);
    assert_eq!(queue.status_for(a, Owner::NONE), OpStatus::NotYours);
    assert_eq!(
        queue.status_for(b, bob),
        failed(UNIQUE, "UNIQUE constraint failed: users.email")
    );
    // The operator's view sees everything; unknown tickets are unknown to all.
    assert_eq!(queue.status(b), queue.status_for(b, bob));
    assert_eq!(queue.status_for(3, bob), OpStatus::Unknown);
    assert_eq!(queue.status_for(0, bob), OpStatus::Unknown);
    // Removed by an operator: still the submitter's.
    let c = queue.submit_as(user(3), 0, alice).unwrap().ticket;
    assert_eq!(queue.fail_first("removed"), Some(c));
    assert_eq!(queue.status_for(c, bob), OpStatus::NotYours);
    assert_eq!(
        queue.status_for(c, alice),
        failed(rusqlite::ffi::SQLITE_ABORT, "removed")
    );
    // Across save and restore.
    let restored = BatchQueue::restore(&queue.save(Vec::new()).unwrap()).unwrap();
    for ticket in [a, b, c] {
        for owner in [alice, bob] {
            assert_eq!(
                restored.status_for(ticket, owner),
                queue.status_for(ticket, owner)
            );
        }
    }
}

/// A submitter flooding the queue evicts only its own outcomes; an evicted outcome still says
/// whether its op committed, to its submitter, while the history holds it.
#[test]
fn a_flood_does_not_evict_another_submitters_outcome() {
    let conn = open_db();
    let victim = Owner::of(b"victim");
    let flooder = Owner::of(b"flooder");
    let mut queue = BatchQueue::new(Config {
        outcome_capacity: 50,
        history_capacity: 20_000,
        ..config(1_000, 2_000)
    })
    .unwrap();
    let kept = queue.submit_as(user(0), 0, victim).unwrap().ticket;
    let fails = queue.submit_as(user(0), 0, flooder).unwrap().ticket;
    for round in 0..10 {
        for _ in 0..1_000 {
            queue
                .submit_as(
                    WriteOp::single("UPDATE users SET username = username WHERE 0", vec![]),
                    0,
                    flooder,
                )
                .map(drop)
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        queue.flush(&conn, &CountingMeter::new(0)).unwrap();
    }
    assert_eq!(queue.status_for(kept, victim), committed(1, 1));
    assert_eq!(
        queue.status_for(fails, flooder),
        OpStatus::Evicted {
            committed: Some(false)
        }
    );
    assert_eq!(
        queue.status_for(5_000, flooder),
        OpStatus::Evicted {
            committed: Some(true)
        }
    );
    assert_eq!(queue.status_for(5_000, victim), OpStatus::NotYours);
    let newest = queue.next_ticket() - 1;
    assert_eq!(queue.status_for(newest, flooder), committed(0, 0));
    // Older than the history: nobody knows its submitter, so anybody is told that much.
    queue
        .reconfigure(Config {
            history_capacity: 100,
            ..queue.config().clone()
        })
        .unwrap();
    for owner in [flooder, victim] {
        assert_eq!(
            queue.status_for(fails, owner),
            OpStatus::Evicted { committed: None }
        );
    }
    assert_eq!(queue.status_for(kept, victim), committed(1, 1));
}

#[test]
fn tickets_start_where_the_queue_says() {
    let conn = open_db();
    assert!(matches!(
        BatchQueue::with_first_ticket(config(10, 10), 0),
        Err(ConfigError::InvalidState { .. })
    ));
    let mut queue = BatchQueue::with_first_ticket(config(10, 10), 1_000_000).unwrap();
    assert_eq!(queue.submit(user(1), 0).unwrap().ticket, 1_000_000);
    assert_eq!(queue.status(999_999), OpStatus::Unknown);
    assert_eq!(queue.status(1), OpStatus::Unknown);
    queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(queue.status(1_000_000), committed(1, 1));
    let restored = BatchQueue::restore(&queue.save(Vec::new()).unwrap()).unwrap();
    assert_eq!(restored.first_ticket(), 1_000_000);
    assert_eq!(restored.status(999_999), OpStatus::Unknown);
    assert_eq!(restored.next_ticket(), 1_000_001);
}
