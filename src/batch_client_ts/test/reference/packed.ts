/**
 * The packed client batch of the reference canister (`bench_api::packed` in Rust): ops and
 * outcomes in a compact binary form. A test codec, not part of the package (the reference
 * canister's own workload): a byte-for-byte port, checked against the shared test vectors
 * written by the Rust codec, which the batcher's simulated canister and the reference
 * canister's end-to-end tests speak.
 *
 * Integers are LEB128 varints (`uint`), signed ones zigzag-encoded first (`sint`); a float is
 * its 8 IEEE 754 bytes, little-endian; a text is its UTF-8 byte length as a `uint`, then the
 * bytes.
 *
 * - Ops, version 1: the byte `1`, then per op a tag and its fields: 1 `CreateOrder` (user_id
 *   sint, amount f64), 2 `UpdateOrderAmount` (order_id sint, amount f64), 3
 *   `DeleteUserOrders` (user_id sint), 4 `CreateUser` (username text, email text).
 * - Keyed ops, version 2: the byte `2`, `created_at_time` (u64 little-endian), 16 id bytes,
 *   then the ops as in version 1 (without its version byte).
 * - Outcomes, version 2: the byte `2`, then records: 0 one committed (rows_changed uint,
 *   last_insert_rowid sint), 1 one failed (code sint, message text), 2 a run of committed
 *   outcomes (count uint, rows_changed uint, first sint, step sint: the k-th has rowid
 *   first + k·step).
 * - Keyed outcomes, version 3: the byte `3`, a flags byte (bit 0: duplicate), then the
 *   outcomes as in version 2.
 *
 * 64-bit integers are `bigint`s. Floats are JavaScript numbers; a NaN keeps its payload bits
 * as far as the engine does (V8 does through `DataView`).
 */

import type { BatchKey, Outcome } from '../../src/types.js';
import { PackedError, Reader, Writer, putOutcomes, readOutcomes, uintLen, utf8Encoder, zigzag } from '../../src/wire.js';

export { PackedError };
export type { BatchKey, Outcome };

/** Ops of the users/orders workload. */
export type UserOrderOp =
  | { CreateUser: { username: string; email: string } }
  | { CreateOrder: { user_id: bigint; amount: number } }
  | { UpdateOrderAmount: { order_id: bigint; amount: number } }
  | { DeleteUserOrders: { user_id: bigint } };

/** A decoded keyed reply. */
export interface KeyedReply {
  duplicate: boolean;
  outcomes: Outcome[];
}

export const VERSION = 1;
export const REPLY_VERSION = 2;
export const KEYED_VERSION = 2;
export const KEYED_REPLY_VERSION = 3;
export const FLAG_DUPLICATE = 1;
/** Bytes before the ops of a keyed request. */
export const KEYED_HEADER_BYTES = 1 + 8 + 16;

const CREATE_ORDER = 1;
const UPDATE_ORDER_AMOUNT = 2;
const DELETE_USER_ORDERS = 3;
const CREATE_USER = 4;

function putOps(w: Writer, ops: readonly UserOrderOp[]): void {
  for (const op of ops) {
    if ('CreateOrder' in op) {
      w.byte(CREATE_ORDER);
      w.sint(op.CreateOrder.user_id);
      w.f64(op.CreateOrder.amount);
    } else if ('UpdateOrderAmount' in op) {
      w.byte(UPDATE_ORDER_AMOUNT);
      w.sint(op.UpdateOrderAmount.order_id);
      w.f64(op.UpdateOrderAmount.amount);
    } else if ('DeleteUserOrders' in op) {
      w.byte(DELETE_USER_ORDERS);
      w.sint(op.DeleteUserOrders.user_id);
    } else {
      w.byte(CREATE_USER);
      w.text(op.CreateUser.username);
      w.text(op.CreateUser.email);
    }
  }
}

/** Packs ops (version 1). */
export function encodeOps(ops: readonly UserOrderOp[]): Uint8Array {
  const w = new Writer();
  w.byte(VERSION);
  putOps(w, ops);
  return w.finish();
}

/** Packs a keyed request (version 2): the key, then the ops. */
export function encodeKeyedOps(key: BatchKey, ops: readonly UserOrderOp[]): Uint8Array {
  if (key.id.length !== 16) throw new RangeError(`a key id has 16 bytes, not ${key.id.length}`);
  const w = new Writer();
  w.byte(KEYED_VERSION);
  w.u64le(key.createdAtTimeNs);
  w.raw(key.id);
  putOps(w, ops);
  return w.finish();
}

/** The bytes one op takes in a request (its tag and fields). */
export function opLen(op: UserOrderOp): number {
  if ('CreateOrder' in op) return 1 + uintLen(zigzag(op.CreateOrder.user_id)) + 8;
  if ('UpdateOrderAmount' in op) return 1 + uintLen(zigzag(op.UpdateOrderAmount.order_id)) + 8;
  if ('DeleteUserOrders' in op) return 1 + uintLen(zigzag(op.DeleteUserOrders.user_id));
  const text = (t: string) => {
    const n = utf8Encoder.encode(t).length;
    return uintLen(BigInt(n)) + n;
  };
  return 1 + text(op.CreateUser.username) + text(op.CreateUser.email);
}

function readOps(r: Reader, maxOps: number): UserOrderOp[] {
  const ops: UserOrderOp[] = [];
  while (!r.done()) {
    if (ops.length === maxOps) throw r.error(`more than ${maxOps} ops`);
    const tag = r.byte('an op tag');
    switch (tag) {
      case CREATE_ORDER: {
        const user_id = r.sint('user_id');
        ops.push({ CreateOrder: { user_id, amount: r.f64('amount') } });
        break;
      }
      case UPDATE_ORDER_AMOUNT: {
        const order_id = r.sint('order_id');
        ops.push({ UpdateOrderAmount: { order_id, amount: r.f64('amount') } });
        break;
      }
      case DELETE_USER_ORDERS:
        ops.push({ DeleteUserOrders: { user_id: r.sint('user_id') } });
        break;
      case CREATE_USER: {
        const username = r.text('username');
        ops.push({ CreateUser: { username, email: r.text('email') } });
        break;
      }
      default:
        r.offset -= 1;
        throw r.error(`unknown op tag ${tag}`);
    }
  }
  return ops;
}

/** Unpacks ops (version 1); at most `maxOps`. */
export function decodeOps(bytes: Uint8Array, maxOps: number): UserOrderOp[] {
  return readOps(Reader.withVersion(bytes, VERSION), maxOps);
}

/** The key of a keyed request and its ops bytes, without decoding the ops. */
export function keyedOpsBody(bytes: Uint8Array): { key: BatchKey; body: Uint8Array } {
  const r = Reader.withVersion(bytes, KEYED_VERSION);
  const time = r.array(8, 'created_at_time');
  const id = r.array(16, "the key's id");
  const createdAtTimeNs = new DataView(time.buffer, time.byteOffset, 8).getBigUint64(0, true);
  return { key: { createdAtTimeNs, id }, body: bytes.subarray(KEYED_HEADER_BYTES) };
}

/** Unpacks a keyed request (version 2): its key and at most `maxOps` ops. */
export function decodeKeyedOps(bytes: Uint8Array, maxOps: number): { key: BatchKey; ops: UserOrderOp[] } {
  const { key } = keyedOpsBody(bytes);
  const r = new Reader(bytes);
  r.offset = KEYED_HEADER_BYTES;
  return { key, ops: readOps(r, maxOps) };
}

/** Packs outcomes (reply version 2). */
export function encodeOutcomes(outcomes: readonly Outcome[]): Uint8Array {
  const w = new Writer();
  w.byte(REPLY_VERSION);
  putOutcomes(w, outcomes);
  return w.finish();
}

/** Packs a keyed reply (version 3). */
export function encodeKeyedOutcomes(duplicate: boolean, outcomes: readonly Outcome[]): Uint8Array {
  const w = new Writer();
  w.byte(KEYED_REPLY_VERSION);
  w.byte(duplicate ? FLAG_DUPLICATE : 0);
  putOutcomes(w, outcomes);
  return w.finish();
}

/** Unpacks outcomes (reply version 2); at most `maxOutcomes`. */
export function decodeOutcomes(bytes: Uint8Array, maxOutcomes: number): Outcome[] {
  return readOutcomes(Reader.withVersion(bytes, REPLY_VERSION), maxOutcomes);
}

/** Unpacks a keyed reply (version 3); at most `maxOutcomes` outcomes. */
export function decodeKeyedOutcomes(bytes: Uint8Array, maxOutcomes: number): KeyedReply {
  const r = Reader.withVersion(bytes, KEYED_REPLY_VERSION);
  const flags = r.byte('the flags byte');
  if ((flags & ~FLAG_DUPLICATE) !== 0) {
    r.offset -= 1;
    throw r.error(`unknown flags 0x${flags.toString(16).padStart(2, '0')}`);
  }
  return { duplicate: (flags & FLAG_DUPLICATE) !== 0, outcomes: readOutcomes(r, maxOutcomes) };
}
