/**
 * What a batch looks like on the wire: the {@link BatchCodec} interface, and the reference
 * canister's keyed packed batch ({@link PackedUserOrders}) sent as a Candid `blob`.
 */
import { IDL } from '@icp-sdk/core/candid';

import { RejectCode } from './transport.js';
import {
  type BatchKey,
  type Outcome,
  type UserOrderOp,
  KEYED_HEADER_BYTES,
  decodeKeyedOutcomes,
  encodeKeyedOps,
  opLen,
} from './packed.js';

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

/** Why the reference canister refused a keyed batch: the name of the reject and its detail. */
export interface PackedRefusal {
  /**
   * `TooOld`, `CreatedInFuture`, `DigestMismatch`, `StoreFull` (the deduplication store), or a
   * `WriteError` (`QueueFull`, `QueueBytesFull`, `Invalid`, `NotAuthorized`, `Database`).
   */
  name: string;
  detail: string;
}

const KNOWN_REFUSALS = new Set([
  'TooOld',
  'CreatedInFuture',
  'DigestMismatch',
  'StoreFull',
  'QueueFull',
  'QueueBytesFull',
  'Invalid',
  'NotAuthorized',
  'Database',
]);
const RETRY_REFUSALS = new Set(['StoreFull', 'Database', 'QueueFull', 'QueueBytesFull']);

/** Candid framing of a blob argument: magic, type table, argument type, LEB128 length. */
const CANDID_BLOB_FRAMING = 4 + 1 + 2 + 1 + 1 + 3;
const BLOB = IDL.Vec(IDL.Nat8);

/** The reference canister's keyed packed batch (request version 2, reply version 3). */
export class PackedUserOrders implements BatchCodec<UserOrderOp, Outcome, PackedRefusal> {
  readonly headerLen = CANDID_BLOB_FRAMING + KEYED_HEADER_BYTES;

  opLen(op: UserOrderOp): number {
    return opLen(op);
  }

  encode(key: BatchKey, ops: readonly UserOrderOp[]): Uint8Array {
    return new Uint8Array(IDL.encode([BLOB], [encodeKeyedOps(key, ops)]));
  }

  decode(reply: Uint8Array, ops: number): Reply<Outcome, PackedRefusal> {
    const [blob] = IDL.decode([BLOB], reply) as [Uint8Array | number[]];
    const decoded = decodeKeyedOutcomes(blob instanceof Uint8Array ? blob : Uint8Array.from(blob), ops);
    if (decoded.outcomes.length !== ops) {
      throw new Error(`${decoded.outcomes.length} outcomes for a batch of ${ops} ops`);
    }
    return { kind: 'executed', outcomes: decoded.outcomes, duplicate: decoded.duplicate };
  }

  refusalOfReject(code: RejectCode, message: string): PackedRefusal | undefined {
    if (code !== RejectCode.CanisterReject) return undefined;
    const at = message.indexOf(': ');
    const name = at < 0 ? message : message.slice(0, at);
    if (!KNOWN_REFUSALS.has(name)) return undefined;
    return { name, detail: at < 0 ? '' : message.slice(at + 2) };
  }

  refusalKind(refusal: PackedRefusal): RefusalKind {
    if (refusal.name === 'TooOld') return 'tooOld';
    return RETRY_REFUSALS.has(refusal.name) ? 'retry' : 'final';
  }

  notExecuted(outcome: Outcome): boolean {
    return 'Failed' in outcome && outcome.Failed.code === 9 && outcome.Failed.message.startsWith('not executed: ');
  }

  describe(refusal: PackedRefusal): string {
    return refusal.detail === '' ? refusal.name : `${refusal.name}: ${refusal.detail}`;
  }
}
