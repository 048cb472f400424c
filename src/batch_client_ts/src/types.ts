/** The values every codec shares: an op's outcome, and a batch's key. */

/**
 * The result of one write: committed (rows changed, the last rowid inserted), failed (SQLite's
 * code and message), or not executed (its batch's instruction budget was used up before it
 * started: nothing of it was applied; the batcher sends it again in a later batch).
 */
export type Outcome =
  | { Committed: { rows_changed: bigint; last_insert_rowid: bigint } }
  | { Failed: { code: number; message: string } }
  | { NotExecuted: null };

/** A batch's key: its creation time (ns since the Unix epoch) and 16 bytes. */
export interface BatchKey {
  createdAtTimeNs: bigint;
  id: Uint8Array;
}
