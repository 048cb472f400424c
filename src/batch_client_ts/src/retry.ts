/**
 * Which refusals and outcomes the batcher sends again: ic-rusqlite-batch-types' retry table
 * (`batch_types::retry::RULES`), by the Candid names of the type and the variant. The test
 * `test/twins.test.ts` checks it is the Rust table, as that crate writes it
 * (`src/batch_types/testdata/retry_rules.json`).
 */

/**
 * `Never`: final, deliver it. `SameKey`: nothing ran and a later attempt may succeed: send the
 * same batch again under its key, after a backoff. `Expired`: the key is older than the
 * canister's window (whether an earlier attempt ran is no longer known). `NewBatch`: the op did
 * not run: send it again in a later batch, under a new key.
 */
export type Retry = 'Never' | 'SameKey' | 'Expired' | 'NewBatch';

/**
 * The rule of every case a client can be answered: every `WriteError`, every `BatchRefusal` but
 * `Refused` (which follows its `WriteError`), and every `Outcome`.
 */
export const RETRY_RULES = {
  BatchRefusal: {
    DeclarationMismatch: 'Never',
    InvalidParam: 'Never',
    Malformed: 'Never',
    NotAuthorized: 'Never',
  },
  Outcome: {
    Committed: 'Never',
    Failed: 'Never',
    NotExecuted: 'NewBatch',
  },
  WriteError: {
    CreatedInFuture: 'Never',
    Database: 'SameKey',
    DigestMismatch: 'Never',
    Invalid: 'Never',
    NotAuthorized: 'Never',
    QueueBytesFull: 'SameKey',
    QueueFull: 'SameKey',
    StoreFull: 'SameKey',
    TooOld: 'Expired',
  },
} as const satisfies Record<string, Record<string, Retry>>;

/** The rule of the variant `value` holds (a Candid variant: an object of one field), in `type`'s table. */
export function retryOf(type: keyof typeof RETRY_RULES, value: object): Retry {
  const name = Object.keys(value)[0]!;
  const rule = (RETRY_RULES[type] as Record<string, Retry>)[name];
  if (rule === undefined) throw new Error(`${type}::${name} has no retry rule`);
  return rule;
}
