//! A notes canister with batched writes: `add_note` answers a ticket at once, and the note is
//! written with others in one SQLite transaction (when `flush_size` notes are queued, or by
//! the timer within `max_delay_ms`). Everything between the two `glue` lines is what
//! ic-rusqlite-batch asks of a canister; the `notes` query below them is the canister's own.

// ---- glue: batched writes ----
use ic_rusqlite_batch as batch;

batch::writes! {
    /// The notes canister's writes.
    pub enum NoteWrite {
        /// Adds a note of at most 1,000 bytes.
        add = "INSERT INTO notes (text) VALUES (?1)" { text: String [max 1000] },
        /// Deletes note `id`.
        delete = "DELETE FROM notes WHERE id = ?1" { id: i64 },
    }
}

static SETUP: batch::Setup = batch::Setup::small_writes(
    "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT, \
     text TEXT NOT NULL CHECK (length(text) > 0));",
    &[
        ("add_note", batch::MethodClass::SmallWrite),
        ("delete_note", batch::MethodClass::SmallWrite),
        ("notes", batch::MethodClass::Query),
    ],
);

batch::canister_methods!(SETUP);

batch::update! {
    /// Queues a note; its ticket tells its id once flushed (`last_insert_rowid`).
    fn add_note(text: String) -> Result<batch::Ticket, batch::WriteError> {
        batch::submit(NoteWrite::add { text })
    }

    /// Queues the deletion of note `id`.
    fn delete_note(id: i64) -> Result<batch::Ticket, batch::WriteError> {
        batch::submit(NoteWrite::delete { id })
    }
}
// ---- end of glue ----

/// A stored note.
#[derive(candid::CandidType, candid::Deserialize, Clone, Debug, PartialEq)]
pub struct Note {
    /// Its id (the table's rowid).
    pub id: i64,
    /// Its text.
    pub text: String,
}

batch::query! {
    /// The notes with `id > after`, by id, at most 100 (called as an update: for writers only).
    fn notes(after: i64) -> Result<Vec<Note>, batch::QueryError> {
        fn db_error(e: impl std::fmt::Display) -> batch::QueryError {
            batch::QueryError::Database(e.to_string())
        }
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
}

ic_cdk::export_candid!();
