//! The users/orders write operations of the Candid API, as SQL for batch_core.

use batch_core::{SqlValue, Statement, WriteOp};
use bench_api::UserOrderOp;
pub use bench_api::schema::{DELETE_USER_ORDERS, INSERT_ORDER, INSERT_USER, UPDATE_ORDER_AMOUNT};

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
