//! The reference canister's writes declared once ([`UserOrderWrite`]): the canister derives
//! its exactly-once client-batch methods from it (`execute_writes`, `execute_writes_packed`,
//! `batch_declaration`, through `ic_rusqlite_batch::client_batches!`), and its Rust clients
//! pack ops with it (`ic_batch_client::Declared<UserOrderWrite>`). The same four writes as
//! [`UserOrderOp`], with the same SQL ([`crate::schema`], checked by a test) and the same
//! limits.

use crate::{MAX_EMAIL_BYTES, MAX_USERNAME_BYTES, UserOrderOp};

batch_types::writes! {
    /// The users/orders writes of the reference canister (each variant's fields are its SQL's
    /// parameters, in order).
    #[allow(missing_docs)]
    pub enum UserOrderWrite {
        /// Creates a user (`INSERT_USER` of `bench_api::schema`).
        create_user = "INSERT INTO users (username, email) VALUES (?1, ?2)" {
            username: String [max 100], email: String [max 254]
        },
        /// Creates an order of `user_id` (`INSERT_ORDER`).
        create_order = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)" {
            user_id: i64, amount: f64
        },
        /// Sets an order's amount (`UPDATE_ORDER_AMOUNT`).
        update_order_amount = "UPDATE orders SET amount = ?2 WHERE order_id = ?1" {
            order_id: i64, amount: f64
        },
        /// Deletes the orders of `user_id` (`DELETE_USER_ORDERS`).
        delete_user_orders = "DELETE FROM orders WHERE user_id = ?1" { user_id: i64 },
    }
}

// The declaration's size limits are the interface's (`[max ..]` takes a literal).
const _: () = assert!(MAX_USERNAME_BYTES == 100 && MAX_EMAIL_BYTES == 254);

impl From<UserOrderOp> for UserOrderWrite {
    fn from(op: UserOrderOp) -> Self {
        match op {
            UserOrderOp::CreateUser { username, email } => {
                UserOrderWrite::create_user { username, email }
            }
            UserOrderOp::CreateOrder { user_id, amount } => {
                UserOrderWrite::create_order { user_id, amount }
            }
            UserOrderOp::UpdateOrderAmount { order_id, amount } => {
                UserOrderWrite::update_order_amount { order_id, amount }
            }
            UserOrderOp::DeleteUserOrders { user_id } => {
                UserOrderWrite::delete_user_orders { user_id }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use batch_types::declare::Writes;

    use super::UserOrderWrite;
    use crate::schema::{DELETE_USER_ORDERS, INSERT_ORDER, INSERT_USER, UPDATE_ORDER_AMOUNT};

    #[test]
    fn the_declared_sql_is_the_schema_s() {
        let sql: Vec<&str> = UserOrderWrite::declaration()
            .writes
            .iter()
            .map(|w| w.sql)
            .collect();
        assert_eq!(
            sql,
            [
                INSERT_USER,
                INSERT_ORDER,
                UPDATE_ORDER_AMOUNT,
                DELETE_USER_ORDERS
            ]
        );
    }
}
