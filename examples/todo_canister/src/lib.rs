//! A todo store whose clients send its writes in keyed batches: each batch runs in one
//! transaction, exactly once under the client's key, however often it is retried. The writes
//! are declared once; the batch methods, their Candid types, the packed format and every check
//! are derived from that declaration, which the canister and its Rust clients share: this crate
//! is both the canister (wasm32) and, natively, the declaration its clients depend on (the
//! library's macros expand to the canister's methods on wasm32 only). Everything between the two
//! `glue` lines is what ic-rusqlite-batch asks of a canister; the `todos` query below them is the
//! canister's own.

// ---- glue: client batches ----
use ic_rusqlite_batch as batch;

batch::writes! {
    /// The todo store's writes.
    pub enum TodoWrite {
        /// Adds a todo, due at `due_ns` (nanoseconds since the epoch) or never.
        add = "INSERT INTO todos (title, due_ns) VALUES (?1, ?2)" {
            title: String [max 200], due_ns: Option<i64>
        },
        /// Marks todo `id` done.
        complete = "UPDATE todos SET done = 1 WHERE id = ?1" { id: i64 },
        /// Deletes every done todo: controllers only.
        purge_done (controllers) = "DELETE FROM todos WHERE done = 1" {},
        /// Renames todo `id`.
        rename = "UPDATE todos SET title = ?2 WHERE id = ?1" { id: i64, title: String [max 200] },
    }
}

static SETUP: batch::Setup = batch::Setup::small_writes(
    "CREATE TABLE IF NOT EXISTS todos (id INTEGER PRIMARY KEY, title TEXT NOT NULL \
     CHECK (length(title) > 0), due_ns INTEGER, done INTEGER NOT NULL DEFAULT 0);",
    &[],
);
batch::canister_methods!(SETUP);
batch::client_batches!(TodoWrite);
// ---- end of glue ----

// One write per call too, where a client has a single write to send: `execute_write` (now)
// and `submit_write` (queued), from the same declaration.
batch::single_writes!(TodoWrite);

/// A stored todo (the `todos` query's reply, which a client decodes with this type).
#[derive(candid::CandidType, candid::Deserialize, Clone, Debug, PartialEq)]
pub struct Todo {
    /// Its id (the table's rowid).
    pub id: i64,
    /// Its title.
    pub title: String,
    /// When it is due, in nanoseconds since the epoch.
    pub due_ns: Option<i64>,
    /// Marked done.
    pub done: bool,
}

batch::query! {
    /// The todos with `id > after`, by id, at most 100.
    fn todos(after: i64) -> Result<Vec<Todo>, batch::QueryError> {
        fn db_error(e: impl std::fmt::Display) -> batch::QueryError {
            batch::QueryError::Database(e.to_string())
        }
        batch::with_connection(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, title, due_ns, done FROM todos WHERE id > ?1 ORDER BY id LIMIT 100",
                )
                .map_err(db_error)?;
            let rows = stmt.query_map([after], |r| {
                Ok(Todo {
                    id: r.get(0)?,
                    title: r.get(1)?,
                    due_ns: r.get(2)?,
                    done: r.get(3)?,
                })
            });
            rows.and_then(Iterator::collect).map_err(db_error)
        })
    }
}

ic_cdk::export_candid!();
