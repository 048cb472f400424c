/**
 * What a batch looks like on the wire: the {@link BatchCodec} interface, and what every keyed
 * batch method of ic-rusqlite-batch shares: its typed refusal (`WriteError`) and what the
 * batcher does with each, and the op it reports not executed.
 */
import { IDL } from '@icp-sdk/core/candid';

import { type Retry, retryOf } from './retry.js';
import type { RejectCode } from './transport.js';
import type { BatchKey, Outcome } from './types.js';

/** What the canister answered to a batch. */
export type Reply<O, R> =
  | { kind: 'executed'; outcomes: O[]; duplicate: boolean }
  | { kind: 'refused'; refusal: R };

/**
 * What the batcher does with a refusal: deliver it (`final`), treat it as a key too old
 * (`tooOld`: unknown if an earlier attempt may have run), or retry with the same key
 * (`retry`: nothing ran and a later attempt may succeed).
 */
export type RefusalKind = 'final' | 'tooOld' | 'retry';

/** The format of a batch method. */
export interface BatchCodec<Op, O, R> {
  /** The most bytes a request takes besides its ops. */
  readonly headerLen: number;
  /**
   * The op the batcher keeps for `op` when it is submitted, if the codec copies it (so that a
   * change the caller makes to `op` afterwards does not change what is sent); `op` itself if
   * absent. May throw to refuse `op`.
   */
  snapshot?(op: Op): Op;
  /** The bytes `op` adds to a request. */
  opLen(op: Op): number;
  /** The method's Candid argument for `ops` under `key`. */
  encode(key: BatchKey, ops: readonly Op[]): Uint8Array;
  /** Reads the method's reply to a batch of `ops` ops; throws if it cannot. */
  decode(reply: Uint8Array, ops: number): Reply<O, R>;
  /** The refusal a reject stands for, if the canister refuses batches with rejects. */
  refusalOfReject(code: RejectCode, message: string): R | undefined;
  /** What the batcher does with `refusal`. */
  refusalKind(refusal: R): RefusalKind;
  /** Whether `outcome` says the op did not run at all (it may be sent again, under a new key). */
  notExecuted(outcome: O): boolean;
  /** The refusal as text. */
  describe(refusal: R): string;
}

/**
 * The reference canister's `WriteError` (ic-rusqlite-batch's typed refusal), as the JS agent's
 * Candid decoder gives it: one key, the variant's name.
 */
export type WriteError =
  | { QueueFull: { capacity: bigint } }
  | { QueueBytesFull: { pending_bytes: bigint; capacity_bytes: bigint } }
  | { Invalid: string }
  | { NotAuthorized: null }
  | { Database: string }
  | { TooOld: { created_at_time: bigint; now: bigint; oldest_accepted: bigint } }
  | { CreatedInFuture: { created_at_time: bigint; now: bigint; newest_accepted: bigint } }
  | { DigestMismatch: { created_at_time: bigint } }
  | {
      StoreFull: {
        keys_held: bigint;
        max_keys: bigint;
        bytes_held: bigint;
        max_bytes: bigint;
        /** Whose share of the store is full: the caller's, or the whole store. */
        share: { Caller: null } | { Store: null };
      };
    };

/** `WriteError`'s Candid type (the canister's `.did`). */
export const WRITE_ERROR = IDL.Variant({
  QueueFull: IDL.Record({ capacity: IDL.Nat64 }),
  QueueBytesFull: IDL.Record({ pending_bytes: IDL.Nat64, capacity_bytes: IDL.Nat64 }),
  Invalid: IDL.Text,
  NotAuthorized: IDL.Null,
  Database: IDL.Text,
  TooOld: IDL.Record({ created_at_time: IDL.Nat64, now: IDL.Nat64, oldest_accepted: IDL.Nat64 }),
  CreatedInFuture: IDL.Record({ created_at_time: IDL.Nat64, now: IDL.Nat64, newest_accepted: IDL.Nat64 }),
  DigestMismatch: IDL.Record({ created_at_time: IDL.Nat64 }),
  StoreFull: IDL.Record({
    keys_held: IDL.Nat64,
    max_keys: IDL.Nat64,
    bytes_held: IDL.Nat64,
    max_bytes: IDL.Nat64,
    share: IDL.Variant({ Caller: IDL.Null, Store: IDL.Null }),
  }),
});

export const BLOB = IDL.Vec(IDL.Nat8);

/** A `WriteError` refusing a batch: the error, its name, and its fields as text. */
export interface WriteRefusal {
  /**
   * `TooOld`, `CreatedInFuture`, `DigestMismatch`, `StoreFull` (the deduplication store),
   * `QueueFull`, `QueueBytesFull`, `Invalid`, `NotAuthorized` or `Database`.
   */
  name: string;
  detail: string;
  error: WriteError;
}

/** The batcher's handling of a refusal the retry table gives `rule`. */
export function refusalKindOfRule(rule: Retry): RefusalKind {
  switch (rule) {
    case 'Never':
      return 'final';
    case 'Expired':
      return 'tooOld';
    case 'SameKey':
      return 'retry';
    case 'NewBatch':
      throw new Error('the retry table gives NewBatch only to an outcome, not to a refusal');
  }
}

/**
 * What the batcher does with a `WriteError` refusing a whole batch (every keyed batch method of
 * ic-rusqlite-batch refuses with one), as the retry table ({@link RETRY_RULES}) says: `TooOld`
 * is `tooOld`; a full deduplication store, a database error (the transaction could not begin)
 * and a full queue are retried; the others (`Invalid`, `NotAuthorized`, `CreatedInFuture`,
 * `DigestMismatch`) are final.
 */
export function refusalKindOfWriteError(error: WriteError): RefusalKind {
  return refusalKindOfRule(retryOf('WriteError', error));
}

/** `error`'s fields as text: `field value, ...` (a variant as its name). */
function fieldsText(value: unknown): string {
  if (value === null) return '';
  if (typeof value === 'string') return value;
  return Object.entries(value as Record<string, unknown>)
    .map(([field, v]) => `${field} ${typeof v === 'object' && v !== null ? Object.keys(v).join('') : String(v)}`)
    .join(', ');
}

/** The refusal `error` stands for. */
export function refusalOf(error: WriteError): WriteRefusal {
  const [[name, value]] = Object.entries(error) as [[string, unknown]];
  return { name, detail: fieldsText(value), error };
}

/**
 * Whether `outcome` says the op did not run at all (`NotExecuted`: its batch's instruction
 * budget ended before it), so that the batcher sends it again: the retry table's `NewBatch`.
 * An op interrupted while running did start, and failed.
 */
export function isNotExecuted(outcome: Outcome): boolean {
  return retryOf('Outcome', outcome) === 'NewBatch';
}

/** Candid framing of a blob argument: magic, type table, argument type, LEB128 length. */
export const CANDID_BLOB_FRAMING = 4 + 1 + 2 + 1 + 1 + 3;
