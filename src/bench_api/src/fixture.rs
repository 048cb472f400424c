//! The data every benchmark starts from, defined once: the canister's canbench benchmarks build
//! it inside the canister, the message-level benchmarks through its Candid API.
//!
//! The shapes are those of the ic-rusqlite users/orders benchmark
//! (<https://github.com/wasm-forge/benchmarks/tree/main/sql-users-orders>): user `n` is
//! `user<n>` / `user<n>@example.com`; the i-th order belongs to user `i·13 mod users + 1` with
//! amount `(id·100 + id·17) / 15` in integer arithmetic.

use crate::UserOrderOp;

/// Users of the ic-rusqlite benchmark at full scale.
pub const FULL_SCALE_USERS: usize = 100_000;
/// Orders of the ic-rusqlite benchmark at full scale.
pub const FULL_SCALE_ORDERS: usize = 1_000_000;

/// Users present before a batched/unbatched benchmark.
pub const USERS: usize = 10_000;
/// Orders present before a batched/unbatched benchmark (two per user).
pub const ORDERS: usize = 2 * USERS;

/// The two indexes of the ic-rusqlite benchmark; the batched/unbatched fixture has them too
/// (without the one on `orders.user_id`, "delete a user's orders" scans the whole table).
pub const INDEXES: [&str; 2] = [
    "CREATE INDEX IF NOT EXISTS idx_users_email ON users(email)",
    "CREATE INDEX IF NOT EXISTS idx_orders_user_id ON orders(user_id)",
];

/// Username and email of user `id` (1-based).
pub fn user(id: usize) -> (String, String) {
    (format!("user{id}"), format!("user{id}@example.com"))
}

/// User and amount of the `i`-th order (1-based) when there are `users` users.
pub fn order(i: usize, users: usize) -> (i64, f64) {
    let id = i * 13 % users + 1;
    (id as i64, ((id * 100 + id * 17) / 15) as f64)
}

/// The kinds of write the batched/unbatched benchmarks measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Insert an order.
    Insert,
    /// Change an order's amount.
    Update,
    /// Delete a user's orders.
    Delete,
}

impl Workload {
    /// All kinds, in report order.
    pub const ALL: [Workload; 3] = [Workload::Insert, Workload::Update, Workload::Delete];

    /// Its name in benchmark names (`insert`, `update`, `delete`).
    pub fn name(self) -> &'static str {
        match self {
            Workload::Insert => "insert",
            Workload::Update => "update",
            Workload::Delete => "delete",
        }
    }

    /// The `i`-th op (0-based) of a run on the fixture: users cycle through the fixture's users,
    /// updates through its orders.
    pub fn op(self, i: usize) -> UserOrderOp {
        let user_id = (i % USERS + 1) as i64;
        match self {
            Workload::Insert => UserOrderOp::CreateOrder {
                user_id,
                amount: (i % 1000) as f64 + 0.5,
            },
            Workload::Update => UserOrderOp::UpdateOrderAmount {
                order_id: (i % ORDERS + 1) as i64,
                amount: i as f64,
            },
            Workload::Delete => UserOrderOp::DeleteUserOrders { user_id },
        }
    }
}
