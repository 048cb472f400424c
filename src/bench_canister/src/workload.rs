//! The users/orders write operations of the Candid API, as SQL for batch_core.

use batch_core::{SqlValue, Statement, WriteOp};
use bench_api::UserOrderOp;

/// Inserts a user; `created_at` takes its default.
pub const INSERT_USER: &str = "INSERT INTO users (username, email) VALUES (?1, ?2)";
/// Inserts an order; `created_at` takes its default.
pub const INSERT_ORDER: &str = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)";
/// Sets the amount of one order.
pub const UPDATE_ORDER_AMOUNT: &str = "UPDATE orders SET amount = ?2 WHERE order_id = ?1";
/// Deletes all orders of one user.
pub const DELETE_USER_ORDERS: &str = "DELETE FROM orders WHERE user_id = ?1";

/// The single SQL statement `op` executes.
pub fn to_write_op(op: &UserOrderOp) -> WriteOp {
    let (sql, params) = match op {
        UserOrderOp::CreateUser { username, email } => (
            INSERT_USER,
            vec![
                SqlValue::from(username.as_str()),
                SqlValue::from(email.as_str()),
            ],
        ),
        UserOrderOp::CreateOrder { user_id, amount } => (
            INSERT_ORDER,
            vec![SqlValue::from(*user_id), SqlValue::from(*amount)],
        ),
        UserOrderOp::UpdateOrderAmount { order_id, amount } => (
            UPDATE_ORDER_AMOUNT,
            vec![SqlValue::from(*order_id), SqlValue::from(*amount)],
        ),
        UserOrderOp::DeleteUserOrders { user_id } => {
            (DELETE_USER_ORDERS, vec![SqlValue::from(*user_id)])
        }
    };
    WriteOp::Single(Statement::new(sql, params))
}
