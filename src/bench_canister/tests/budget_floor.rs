//! The smallest flush budget the canister accepts (`MIN_FLUSH_BUDGET`) holds on the schema the
//! canister deploys: no write of the API reads a whole table, and the most expensive op of the
//! workload, measured on the deployable wasm at that budget, fits under it with its margin at
//! two table sizes, without growing with the table. A canister installed before the schema had
//! the index on `orders.user_id` gets it at its upgrade. Build the wasm first with
//! scripts/build.sh.

use bench_api::fixture;
use bench_api::schema::{
    DELETE_USER_ORDERS, INSERT_ORDER, INSERT_USER, ORDERS_USER_ID_INDEX, SCHEMA,
    UPDATE_ORDER_AMOUNT,
};
use bench_api::{MIN_FLUSH_BUDGET, MIN_FLUSH_BUDGET_MARGIN};
use bench_suite::client::default_wasm_path;
use bench_suite::progress::Progress;
use bench_suite::reliability::{BudgetFloor, budget_floor, render_budget_floor};
use offline_engine::SubnetKind;
use rusqlite::{Connection, StatementStatus, params};

const USERS: usize = 100;
const ORDERS: usize = 1_000;

/// The statement of the schema that creates the index.
fn index_statement() -> String {
    format!("CREATE INDEX IF NOT EXISTS {ORDERS_USER_ID_INDEX} ON orders(user_id);")
}

/// A native database with `schema`, foreign keys enforced (as the SQLite the canister links
/// enforces them), 100 users and 1,000 orders of the fixture's shapes, and user 101 without
/// orders.
fn database(schema: &str) -> Connection {
    let db = Connection::open_in_memory().unwrap();
    db.execute_batch("PRAGMA foreign_keys = ON").unwrap();
    db.execute_batch(schema).unwrap();
    for id in 1..=USERS {
        db.execute(INSERT_USER, fixture::user(id)).unwrap();
    }
    for i in 1..=ORDERS {
        db.execute(INSERT_ORDER, fixture::order(i, USERS)).unwrap();
    }
    db.execute(INSERT_USER, ("orderless", "orderless@example.com"))
        .unwrap();
    db
}

/// Rows `sql` stepped through in full scans of a table (SQLite's
/// `SQLITE_STMTSTATUS_FULLSCAN_STEP`, foreign-key checks included), and the rows it changed.
fn full_scan_steps(db: &Connection, sql: &str, params: impl rusqlite::Params) -> (i32, usize) {
    let mut stmt = db.prepare(sql).unwrap();
    let changed = stmt.execute(params).unwrap();
    (stmt.get_status(StatementStatus::FullscanStep), changed)
}

/// Each write of the API, and a controller's delete of a user (whose foreign-key check looks
/// for the user's orders): full-scan steps and rows changed.
fn writes(db: &Connection) -> [(&'static str, (i32, usize)); 5] {
    [
        (
            "create_user",
            full_scan_steps(db, INSERT_USER, ("new", "new@example.com")),
        ),
        ("create_order", full_scan_steps(db, INSERT_ORDER, (7, 2.5))),
        (
            "update_order_amount",
            full_scan_steps(db, UPDATE_ORDER_AMOUNT, (5, 3.5)),
        ),
        (
            "delete_user_orders",
            full_scan_steps(db, DELETE_USER_ORDERS, params![2]),
        ),
        (
            "delete a user (controller SQL)",
            full_scan_steps(db, "DELETE FROM users WHERE user_id = ?1", params![101]),
        ),
    ]
}

#[test]
fn no_write_of_the_api_reads_a_whole_table_on_the_deployed_schema() {
    assert!(SCHEMA.contains(&index_statement()), "{SCHEMA}");
    let db = database(SCHEMA);
    assert_eq!(
        writes(&db),
        [
            ("create_user", (0, 1)),
            ("create_order", (0, 1)),
            ("update_order_amount", (0, 1)),
            ("delete_user_orders", (0, ORDERS / USERS)),
            ("delete a user (controller SQL)", (0, 1)),
        ]
    );
}

#[test]
fn without_the_index_deleting_orders_or_a_user_reads_every_order() {
    // The schema before the index: the check above is not vacuous.
    let before = SCHEMA.replace(&index_statement(), "");
    assert_ne!(before, SCHEMA);
    let db = database(&before);
    // Each scan steps from every order to the next: the delete of a user's orders through the
    // 1,001 orders (create_order added one), the user's delete through the 991 left.
    assert_eq!(
        writes(&db),
        [
            ("create_user", (0, 1)),
            ("create_order", (0, 1)),
            ("update_order_amount", (0, 1)),
            ("delete_user_orders", (1_000, ORDERS / USERS)),
            ("delete a user (controller SQL)", (990, 1)),
        ]
    );
}

/// [`budget_floor`] at the full scale divided by `divisor`, on the deployable wasm.
fn measured(divisor: usize) -> BudgetFloor {
    let f = budget_floor(&default_wasm_path(), divisor, &mut Progress::quiet())
        .unwrap_or_else(|e| panic!("budget floor at 1/{divisor} of the full scale: {e:#}"));
    println!("{}", render_budget_floor(&f));
    f
}

#[test]
fn the_dearest_op_fits_the_floor_with_its_margin_and_does_not_grow_with_the_table() {
    // The full scale the report claims (100,000 users, 1,000,000 orders: about 12 s) and a
    // tenth of it. Each run installs the canister as it was before the index, fills it,
    // upgrades (which creates the index over the orders) to the smallest budget, and runs
    // every op there alone, batched and unbatched, warm and after an upgrade: an op
    // interrupted (code 9) or not changing its rows fails the run.
    let full = measured(1);
    let tenth = measured(10);
    assert_eq!((full.users, full.orders), (100_000, 1_000_000));
    assert_eq!((tenth.users, tenth.orders), (10_000, 100_000));
    for f in [&full, &tenth] {
        assert_eq!(
            (f.floor, f.margin),
            (MIN_FLUSH_BUDGET, MIN_FLUSH_BUDGET_MARGIN)
        );
        assert!(
            f.most_expensive * MIN_FLUSH_BUDGET_MARGIN <= MIN_FLUSH_BUDGET,
            "an ordinary op times the margin exceeds the smallest budget:\n{}",
            render_budget_floor(f)
        );
        assert!(f.fits());
        // The dearest op is the delete of a user's 10 orders.
        let delete = f.ops.iter().find(|o| o.op == "delete_user_orders").unwrap();
        assert_eq!(
            f.most_expensive,
            [
                delete.flush_warm,
                delete.flush_cold,
                delete.unbatched_warm,
                delete.unbatched_cold
            ]
            .into_iter()
            .max()
            .unwrap()
        );
        // The index costs every insert of an order something, batched and unbatched.
        let unindexed = |op: &str| f.unindexed.iter().find(|o| o.op == op).unwrap();
        let create_order = f.ops.iter().find(|o| o.op == "create_order").unwrap();
        assert!(
            create_order.unbatched_warm > unindexed("create_order").unbatched_warm,
            "{f:?}"
        );
        assert!(f.batch_order_indexed > f.batch_order_unindexed, "{f:?}");
        // The upgrade that builds the index over the orders costs more than one that does
        // not, and leaves room for ten times the orders in one upgrade.
        assert!(f.index_upgrade > f.plain_upgrade, "{f:?}");
        assert!(
            f.index_upgrade * 10 < SubnetKind::Application.install_limit(),
            "{f:?}"
        );
    }
    // Ten times the orders: the dearest op grows by what a deeper B-tree costs, at most a
    // quarter (a scan of the orders would grow tenfold).
    assert!(
        full.most_expensive * 4 <= tenth.most_expensive * 5,
        "{} at 1,000,000 orders against {} at 100,000",
        full.most_expensive,
        tenth.most_expensive
    );
    // Without the index, the same delete at the full scale is what this guards against: more
    // than an op alone in a flush may run at the floor (2 × the budget), and more than an
    // unbatched call may (3 ×), so both would be interrupted.
    let unindexed = full
        .unindexed
        .iter()
        .find(|o| o.op == "delete_user_orders")
        .unwrap();
    assert!(unindexed.flush_warm > 2 * MIN_FLUSH_BUDGET, "{unindexed:?}");
    assert!(
        unindexed.unbatched_warm > 3 * MIN_FLUSH_BUDGET,
        "{unindexed:?}"
    );
}
