//! The queue driven the way a canister drives it, through the public API only: submits that
//! fill a batch flush in the same call, a timer flushes the rest, an upgrade moves the pending
//! ops through serialized state, and no acknowledged op is lost.

use batch_core::rusqlite::Connection;
use batch_core::{
    BatchQueue, Clock, Config, CountingMeter, ManualClock, OpError, OpStatus, Outcome, SqlValue,
    Ticket, WriteOp,
};

const SCHEMA: &str = "
CREATE TABLE users (
  user_id INTEGER PRIMARY KEY AUTOINCREMENT,
  username TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);";

struct Canister {
    conn: Connection,
    queue: BatchQueue,
    /// The one timer: when it fires, if armed.
    timer: Option<u64>,
}

impl Canister {
    fn new(config: Config) -> Self {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        Canister {
            conn,
            queue: BatchQueue::new(config).unwrap(),
            timer: None,
        }
    }

    fn flush(&mut self, now: u64) {
        let report = self
            .queue
            .flush(&self.conn, &CountingMeter::new(1))
            .unwrap();
        // Re-arm for what is left (by its own triggers); disarm when empty.
        self.timer = self.queue.next_due(now);
        assert_eq!(report.more_due, self.timer.is_some());
    }

    /// An update call: queue the op; flush in this call if the batch is full; arm the timer
    /// when the queue goes from empty to non-empty.
    fn create_user(&mut self, name: &str, now: u64) -> Ticket {
        let was_empty = self.queue.is_empty();
        let op = WriteOp::single(
            "INSERT INTO users (username, email) VALUES (?1, ?2)",
            vec![name.into(), SqlValue::Text(format!("{name}@example.com"))],
        );
        let submitted = self.queue.submit(op, now).unwrap();
        if submitted.flush_due {
            self.flush(now);
        } else if was_empty {
            assert!(self.timer.is_none(), "never two timers");
            self.timer = self.queue.next_due(now);
        }
        submitted.ticket
    }

    /// The timer fires if due.
    fn tick(&mut self, now: u64) {
        if self.timer.is_some_and(|due| due <= now) {
            self.timer = None;
            self.flush(now);
        }
    }

    fn users(&self) -> i64 {
        self.conn
            .query_row("SELECT COUNT(*) FROM users", [], |row| row.get(0))
            .unwrap()
    }
}

#[test]
fn size_trigger_timer_and_upgrade_lose_nothing() {
    let config = Config {
        flush_size: 4,
        max_delay_ns: 1_000_000_000,
        max_pending: 100,
        max_pending_bytes: 1 << 20,
        // Two ops per flush with a meter advancing by 1 per read.
        flush_instruction_budget: 2,
        outcome_capacity: 100,
        history_capacity: 100,
        // One meter read per op (coalescing would read once per chunk).
        coalesce_rows: 0,
    };
    let clock = ManualClock::new(0);
    let mut canister = Canister::new(config.clone());
    let mut tickets = Vec::new();

    // Three ops: below the size trigger, so the timer is armed for the oldest + max delay.
    for name in ["a", "b", "c"] {
        tickets.push(canister.create_user(name, clock.now_ns()));
        clock.advance(100);
    }
    assert_eq!(canister.timer, Some(1_000_000_000));
    assert_eq!(canister.users(), 0);
    // The fourth fills the batch: flushed in this call, within the budget (two ops).
    tickets.push(canister.create_user("d", clock.now_ns()));
    assert_eq!(canister.users(), 2);
    assert_eq!(canister.queue.len(), 2);
    // The flush left ops below the size trigger: the timer follows the oldest one (c).
    assert_eq!(canister.timer, Some(200 + 1_000_000_000));
    clock.set(1_000_000_200);
    canister.tick(clock.now_ns());
    assert_eq!(canister.users(), 4);
    assert_eq!(canister.timer, None);

    // Two more ops, then an upgrade before the timer fires: pre_upgrade writes the state,
    // post_upgrade restores it and re-arms the timer.
    tickets.push(canister.create_user("e", clock.now_ns()));
    tickets.push(canister.create_user("a", clock.now_ns())); // duplicate email: will fail
    let stable_memory = canister.queue.save(Vec::new()).unwrap();
    canister.queue = BatchQueue::restore(&stable_memory).unwrap();
    assert_eq!(canister.queue.config(), &config);
    canister.timer = canister.queue.next_due(clock.now_ns());
    assert_eq!(canister.queue.status(tickets[4]), OpStatus::Pending);

    clock.advance(2_000_000_000);
    canister.tick(clock.now_ns());
    assert_eq!(canister.users(), 5);
    assert!(canister.queue.is_empty());
    assert_eq!(
        canister.queue.status(tickets[5]),
        OpStatus::Done(Outcome::Failed(OpError {
            code: batch_core::rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE,
            message: "UNIQUE constraint failed: users.email".into()
        }))
    );
    for (i, ticket) in tickets.iter().take(5).enumerate() {
        assert_eq!(
            canister.queue.status(*ticket),
            OpStatus::Done(Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: i as i64 + 1
            })
        );
    }
    let stats = canister.queue.stats();
    assert_eq!(
        (
            stats.submitted,
            stats.committed,
            stats.failed,
            stats.flushes
        ),
        (6, 5, 1, 3)
    );
}

#[test]
fn client_side_batch_and_unbatched_writes() {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    let insert = "INSERT INTO users (username, email) VALUES (?1, ?2)";
    let alone = batch_core::execute_autocommit(
        &conn,
        &WriteOp::single(insert, vec!["x".into(), "x@x".into()]),
    );
    assert_eq!(
        alone,
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1
        }
    );
    let ops: Vec<WriteOp> = ["y", "x", "z"]
        .iter()
        .map(|name| WriteOp::single(insert, vec![(*name).into(), format!("{name}@x").into()]))
        .collect();
    let outcomes = batch_core::execute_batch(&conn, &ops).unwrap();
    assert_eq!(
        outcomes
            .iter()
            .map(Outcome::is_committed)
            .collect::<Vec<_>>(),
        vec![true, false, true]
    );
}
