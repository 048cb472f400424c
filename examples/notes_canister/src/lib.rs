//! A notes canister with batched writes: `add_note` answers a ticket at once, and the note is
//! written with others in one SQLite transaction (when `flush_size` notes are queued, or by
//! the timer within `max_delay_ms`). Everything between the two `glue` lines is what
//! ic-rusqlite-batch asks of a canister; the `notes` query below them is the canister's own.
#![cfg(target_arch = "wasm32")]

// ---- glue: batched writes ----
use ic_rusqlite_batch::{self as batch, Floors, Interface, MethodClass, Statement, WriteOp};
use ic_rusqlite_batch::{Ticket, WriteError};

const INSERT_NOTE: &str = "INSERT INTO notes (text) VALUES (?1)";
const DELETE_NOTE: &str = "DELETE FROM notes WHERE id = ?1";
/// The longest note, in UTF-8 bytes.
const MAX_NOTE_BYTES: usize = 1_000;

static SETUP: batch::Setup = batch::Setup {
    memory_id: 1,
    pragmas: &[("journal_mode", "PERSIST"), ("locking_mode", "EXCLUSIVE")],
    schema: "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT, \
             text TEXT NOT NULL CHECK (length(text) > 0));",
    statement_cache_capacity: 32,
    floors: Floors {
        min_flush_budget: 20_000_000,
        min_flush_budget_reason: "a note could be interrupted (16 times the dearest, tested)",
        min_pending_bytes: (INSERT_NOTE.len() + 16 + MAX_NOTE_BYTES) as u64,
        min_pending_bytes_reason: "the size of the largest note",
    },
    interface: Interface {
        methods: &[
            ("add_note", MethodClass::SmallWrite),
            ("delete_note", MethodClass::SmallWrite),
            ("notes", MethodClass::Query),
        ],
        max_small_arg_bytes: MAX_NOTE_BYTES + 64,
        standard_methods: true,
    },
};

batch::canister_methods!(SETUP);

batch::update! {
    /// Queues a note; its ticket tells its id once flushed (`last_insert_rowid`).
    fn add_note(text: String) -> Result<Ticket, WriteError> {
        batch::submit(if text.len() > MAX_NOTE_BYTES {
            Err(WriteError::Invalid(format!(
                "a note has at most {MAX_NOTE_BYTES} bytes"
            )))
        } else {
            Ok(WriteOp::Single(Statement::new(
                INSERT_NOTE,
                vec![text.into()],
            )))
        })
    }

    /// Queues the deletion of note `id`.
    fn delete_note(id: i64) -> Result<Ticket, WriteError> {
        batch::submit(Ok(WriteOp::Single(Statement::new(
            DELETE_NOTE,
            vec![id.into()],
        ))))
    }
}
// ---- end of glue ----

/// A stored note.
#[derive(candid::CandidType, candid::Deserialize)]
struct Note {
    id: i64,
    text: String,
}

/// The notes with `id > after`, by id, at most 100 (called as an update: for writers only).
#[ic_cdk::query(guard = "batch::query_guard")]
fn notes(after: i64) -> Result<Vec<Note>, batch::QueryError> {
    batch::with_connection(|conn| {
        let mut stmt = conn
            .prepare_cached("SELECT id, text FROM notes WHERE id > ?1 ORDER BY id LIMIT 100")
            .map_err(db_error)?;
        let rows = stmt.query_map([after], |r| {
            Ok(Note {
                id: r.get(0)?,
                text: r.get(1)?,
            })
        });
        rows.and_then(Iterator::collect).map_err(db_error)
    })
}

fn db_error(e: impl std::fmt::Display) -> batch::QueryError {
    batch::QueryError::Database(e.to_string())
}

ic_cdk::export_candid!();
