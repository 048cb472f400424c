//! The Candid interface of `bench_canister` (documented in `bench_canister.did`): the types its
//! methods take and return, the limits it enforces, and the benchmark fixture. The canister,
//! its integration tests and the benchmark suite all use these definitions, and a test checks
//! them against the committed `.did`, so a change to the interface is made once.
#![warn(missing_docs)]

use batch_types::named_results;
use candid::{CandidType, Deserialize, Principal};

pub use batch_types::{
    AdminResult, BatchKey, BatchResult, FlushResult, FlushSummary, InitArgs, MethodClass, OpError,
    Outcome, QueryError, Settings, SqlParam, SqlStatement, Stats, StoreShare, SubmitResult, Ticket,
    TicketStatus, WriteAccess, WriteError, WriteResult,
};

pub mod client;
pub mod fixture;
pub mod packed;
pub mod schema;
pub mod wire;
pub mod writes;

/// The `.did` file of the canister, as committed.
pub const CANDID: &str = include_str!("../../bench_canister/bench_canister.did");

// ---------------------------------------------------------------- limits

/// Most operations one `execute_batch` call accepts.
pub const MAX_CLIENT_BATCH: usize = 10_000;
/// Longest `username`, in UTF-8 bytes.
pub const MAX_USERNAME_BYTES: usize = 100;
/// Longest `email`, in UTF-8 bytes (the longest address RFC 5321 allows).
pub const MAX_EMAIL_BYTES: usize = 254;
/// Most rows a query returns (`limit` above it is lowered to it): at most about 400 bytes per
/// row, so replies stay far below the IC's 2 MiB / 3 MiB reply limits.
pub const MAX_QUERY_ROWS: u32 = 1_000;
/// Most writer principals a controller may register.
pub const MAX_WRITERS: usize = 1_000;
/// Largest argument, in bytes, of the single-operation methods (`create_*`, `submit_*`, ...):
/// the text limits plus Candid's framing. `canister_inspect_message` refuses larger ingress
/// messages before the canister pays for them.
pub const MAX_SINGLE_OP_ARG_BYTES: usize = 1_024;

/// The smallest `flush_instruction_budget` the canister accepts: at least
/// [`MIN_FLUSH_BUDGET_MARGIN`] times the most expensive single op of the reference workload on
/// the schema the canister deploys ([`schema::SCHEMA`]), so that no ordinary op is ever
/// interrupted (an op alone at the start of a flush is interrupted at twice the budget, an
/// unbatched one at three times, and an op may start just before the budget is used up).
///
/// Measured with `bench-suite budget-floor` (engine: offline (wasmtime, IC metering)) on the
/// canister's own schema filled with the full scale of the ic-rusqlite users/orders benchmark
/// (100,000 users, 1,000,000 orders, 10 per user): each op of the API alone, batched (a flush
/// of it alone: `BEGIN`, the op, `COMMIT`) and unbatched (the whole call), warm and as the first
/// write after an upgrade, all at this budget. The most expensive is `delete_user_orders` of a
/// user's 10 orders, as the first write after an upgrade: 1,094,893 instructions in a flush of
/// it alone; 16 × that, 17.5 million, rounded up, is 20 million. It barely grows with the table
/// (1,018,202 at 200,000 orders): the index on `orders.user_id` finds a user's orders, where
/// the schema without it read all 1,000,000 (718 M instructions). A workload whose single ops
/// cost more (users with hundreds of orders, say) needs a larger budget.
pub const MIN_FLUSH_BUDGET: u64 = 20_000_000;

/// How many times the most expensive single op of the reference workload
/// [`MIN_FLUSH_BUDGET`] holds at least: the headroom for what the measurement does not vary
/// (users with more orders than the fixture's 10, a deeper B-tree, SQLite's page cache).
/// `bench-suite budget-floor` and the canister's tests fail when the measured op times this
/// exceeds the floor.
pub const MIN_FLUSH_BUDGET_MARGIN: u64 = 16;

/// Bytes the queue counts for the largest op of the typed API (a `create_user` with a username
/// and an email at their limits; `batch_core::WriteOp::size_bytes`): the smallest
/// `max_pending_bytes` the canister accepts, so that an empty queue takes any typed op.
pub const MIN_PENDING_BYTES: u64 =
    (schema::INSERT_USER.len() + 16 + MAX_USERNAME_BYTES + MAX_EMAIL_BYTES) as u64;

/// Row counts.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Rows of `users`.
    pub users: u64,
    /// Rows of `orders`.
    pub orders: u64,
}

/// A row of the users/orders join.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct UserOrder {
    /// The user.
    pub user_id: i64,
    /// The user's name.
    pub username: String,
    /// The order.
    pub order_id: i64,
    /// The order's amount.
    pub amount: f64,
}

/// A row of `orders`.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct Order {
    /// Its key.
    pub order_id: i64,
    /// Its user.
    pub user_id: i64,
    /// Its amount.
    pub amount: f64,
}

/// A row of `users`.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Its key.
    pub user_id: i64,
    /// Its name.
    pub username: String,
    /// Its email address.
    pub email: String,
    /// When it was created (SQLite's `CURRENT_TIMESTAMP`, UTC).
    pub created_at: String,
}

/// One write of the users/orders workload, as a client submits it.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum UserOrderOp {
    /// Create a user.
    CreateUser {
        /// At most [`MAX_USERNAME_BYTES`].
        username: String,
        /// At most [`MAX_EMAIL_BYTES`].
        email: String,
    },
    /// Create an order for `user_id`.
    CreateOrder {
        /// The user (must exist: foreign key).
        user_id: i64,
        /// The amount (not NaN: `amount` is `NOT NULL`).
        amount: f64,
    },
    /// Change the amount of order `order_id`.
    UpdateOrderAmount {
        /// The order.
        order_id: i64,
        /// The new amount.
        amount: f64,
    },
    /// Delete every order of `user_id`.
    DeleteUserOrders {
        /// The user.
        user_id: i64,
    },
}

impl UserOrderOp {
    /// Checks the text limits ([`MAX_USERNAME_BYTES`], [`MAX_EMAIL_BYTES`]).
    pub fn validate(&self) -> Result<(), String> {
        if let UserOrderOp::CreateUser { username, email } = self {
            if username.len() > MAX_USERNAME_BYTES {
                return Err(format!(
                    "username has {} bytes; the limit is {MAX_USERNAME_BYTES}",
                    username.len()
                ));
            }
            if email.len() > MAX_EMAIL_BYTES {
                return Err(format!(
                    "email has {} bytes; the limit is {MAX_EMAIL_BYTES}",
                    email.len()
                ));
            }
        }
        Ok(())
    }
}

named_results! {
    /// The result of `execute_batch_packed`: the packed outcomes (`packed`), or why the batch
    /// was refused whole (nothing of it ran).
    PackedResult(serde_bytes::ByteBuf, WriteError);
    /// The result of `counts`.
    CountsResult(Counts, QueryError);
    /// The result of `user_orders`.
    UserOrdersResult(Vec<UserOrder>, QueryError);
    /// The result of `orders`.
    OrdersResult(Vec<Order>, QueryError);
    /// The result of `users_by_email_prefix`.
    UsersResult(Vec<User>, QueryError);
}

/// Every method of the canister's interface with its class: the one declaration that
/// `inspect_message` (through `ic_rusqlite_batch::Interface`), the `.did` check (both
/// directions, `tests/did.rs`) and the tests read. A method not listed is refused ingress.
pub const METHODS: &[(&str, MethodClass)] = &[
    ("create_user", MethodClass::SmallWrite),
    ("create_order", MethodClass::SmallWrite),
    ("update_order_amount", MethodClass::SmallWrite),
    ("delete_user_orders", MethodClass::SmallWrite),
    ("execute_sql", MethodClass::Controller),
    ("submit_create_user", MethodClass::SmallWrite),
    ("submit_create_order", MethodClass::SmallWrite),
    ("submit_update_order_amount", MethodClass::SmallWrite),
    ("submit_delete_user_orders", MethodClass::SmallWrite),
    ("submit_sql", MethodClass::Controller),
    ("flush", MethodClass::SmallWrite),
    ("execute_batch", MethodClass::Write),
    ("execute_batch_packed", MethodClass::Write),
    ("execute_writes", MethodClass::Write),
    ("execute_write", MethodClass::SmallWrite),
    ("submit_write", MethodClass::SmallWrite),
    ("execute_writes_packed", MethodClass::Write),
    ("add_writers", MethodClass::Controller),
    ("remove_writers", MethodClass::Controller),
    ("set_read_only", MethodClass::Controller),
    ("writers", MethodClass::Query),
    ("ticket_status", MethodClass::Query),
    ("ticket_statuses", MethodClass::Query),
    ("stats", MethodClass::Query),
    ("settings", MethodClass::Query),
    ("batch_declaration", MethodClass::Query),
    ("counts", MethodClass::Query),
    ("user_orders", MethodClass::Query),
    ("orders", MethodClass::Query),
    ("users_by_email_prefix", MethodClass::Query),
];

/// The methods of `class` in [`METHODS`].
pub fn methods_of(class: MethodClass) -> impl Iterator<Item = &'static str> {
    METHODS
        .iter()
        .filter(move |(_, c)| *c == class)
        .map(|(name, _)| *name)
}

/// A principal list argument (`add_writers`, `remove_writers`).
pub type Principals = Vec<Principal>;
