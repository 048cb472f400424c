/**
 * The packed client batch of the reference canister (`bench_api::packed` in Rust): ops and
 * outcomes in a compact binary form. This is a byte-for-byte port, checked against the shared
 * test vectors written by the Rust codec.
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

/** Ops of the users/orders workload. */
export type UserOrderOp =
  | { CreateUser: { username: string; email: string } }
  | { CreateOrder: { user_id: bigint; amount: number } }
  | { UpdateOrderAmount: { order_id: bigint; amount: number } }
  | { DeleteUserOrders: { user_id: bigint } };

/** The result of one write. */
export type Outcome =
  | { Committed: { rows_changed: bigint; last_insert_rowid: bigint } }
  | { Failed: { code: number; message: string } };

/** A batch's key: its creation time (ns since the Unix epoch) and 16 bytes. */
export interface BatchKey {
  createdAtTimeNs: bigint;
  id: Uint8Array;
}

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
const COMMITTED = 0;
const FAILED = 1;
const COMMITTED_RUN = 2;
const MIN_RUN = 3;

const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;
const U64_MAX = (1n << 64n) - 1n;

/** Why packed bytes were refused: what was expected, at which byte offset. */
export class PackedError extends Error {
  constructor(
    readonly offset: number,
    readonly what: string,
  ) {
    super(`packed batch, byte ${offset}: ${what}`);
    this.name = 'PackedError';
  }
}

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

class Writer {
  private bytes = new Uint8Array(64);
  private view = new DataView(this.bytes.buffer);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < this.length + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
    this.view = new DataView(grown.buffer);
  }

  byte(b: number): void {
    this.reserve(1);
    this.bytes[this.length++] = b;
  }

  raw(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.bytes.set(bytes, this.length);
    this.length += bytes.length;
  }

  uint(n: bigint): void {
    if (n < 0n || n > U64_MAX) throw new RangeError(`${n} is not a 64-bit unsigned integer`);
    while (n >= 0x80n) {
      this.byte(Number(n & 0x7fn) | 0x80);
      n >>= 7n;
    }
    this.byte(Number(n));
  }

  sint(n: bigint): void {
    if (n < I64_MIN || n > I64_MAX) throw new RangeError(`${n} is not a 64-bit signed integer`);
    this.uint(BigInt.asUintN(64, (n << 1n) ^ (n >> 63n)));
  }

  f64(value: number): void {
    this.reserve(8);
    this.view.setFloat64(this.length, value, true);
    this.length += 8;
  }

  u64le(value: bigint): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, value, true);
    this.length += 8;
  }

  text(value: string): void {
    const bytes = utf8Encoder.encode(value);
    this.uint(BigInt(bytes.length));
    this.raw(bytes);
  }

  finish(): Uint8Array {
    return this.bytes.slice(0, this.length);
  }
}

class Reader {
  offset = 0;
  private readonly view: DataView;

  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  done(): boolean {
    return this.offset === this.bytes.length;
  }

  error(what: string): PackedError {
    return new PackedError(this.offset, what);
  }

  static withVersion(bytes: Uint8Array, version: number): Reader {
    const r = new Reader(bytes);
    const v = r.byte('the version byte');
    if (v !== version) throw new PackedError(0, `version ${v}; version ${version} expected`);
    return r;
  }

  byte(what: string): number {
    const b = this.bytes[this.offset];
    if (b === undefined) throw this.error(`${what} expected, the input ended`);
    this.offset += 1;
    return b;
  }

  uint(what: string): bigint {
    const start = this.offset;
    let n = 0n;
    for (let i = 0; i < 10; i++) {
      const b = this.byte(what);
      if (i === 9 && (b & 0x7e) !== 0) break;
      if (i === 9 && (b & 0x80) !== 0) break;
      n |= BigInt(b & 0x7f) << BigInt(7 * i);
      if ((b & 0x80) === 0) return n;
    }
    this.offset = start;
    throw this.error(`${what}: varint longer than 64 bits`);
  }

  sint(what: string): bigint {
    const z = this.uint(what);
    return BigInt.asIntN(64, (z >> 1n) ^ -(z & 1n));
  }

  f64(what: string): number {
    if (this.offset + 8 > this.bytes.length) throw this.error(`${what}: 8 bytes expected, the input ended`);
    const value = this.view.getFloat64(this.offset, true);
    this.offset += 8;
    return value;
  }

  array(n: number, what: string): Uint8Array {
    if (this.offset + n > this.bytes.length) throw this.error(`${what}: ${n} bytes expected, the input ended`);
    const out = this.bytes.slice(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }

  text(what: string): string {
    const len = this.uint(what);
    const start = this.offset;
    if (BigInt(start) + len > BigInt(this.bytes.length)) {
      throw this.error(`${what}: ${len} bytes expected, the input ended`);
    }
    const end = start + Number(len);
    let text: string;
    try {
      text = utf8Decoder.decode(this.bytes.subarray(start, end));
    } catch (e) {
      throw this.error(`${what} is not UTF-8: ${String(e)}`);
    }
    this.offset = end;
    return text;
  }
}

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

function uintLen(n: bigint): number {
  let len = 1;
  while (n >= 0x80n) {
    n >>= 7n;
    len += 1;
  }
  return len;
}

const zigzag = (n: bigint): bigint => BigInt.asUintN(64, (n << 1n) ^ (n >> 63n));

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

function committed(o: Outcome | undefined): [bigint, bigint] | undefined {
  return o !== undefined && 'Committed' in o ? [o.Committed.rows_changed, o.Committed.last_insert_rowid] : undefined;
}

/** The run `outcomes` starts with at `i`, as [count, rows_changed, first, step], if ≥ 3. */
function committedRun(outcomes: readonly Outcome[], i: number): [number, bigint, bigint, bigint] | undefined {
  const a = committed(outcomes[i]);
  const b = committed(outcomes[i + 1]);
  if (a === undefined || b === undefined) return undefined;
  const [rows, first] = a;
  const [secondRows, second] = b;
  const step = second - first;
  if (step < I64_MIN || step > I64_MAX || secondRows !== rows) return undefined;
  let count = 2;
  let last = second;
  for (;;) {
    const next = committed(outcomes[i + count]);
    if (next === undefined) break;
    const expected = last + step;
    if (next[0] !== rows || expected < I64_MIN || expected > I64_MAX || next[1] !== expected) break;
    last = next[1];
    count += 1;
  }
  return count >= MIN_RUN ? [count, rows, first, step] : undefined;
}

function putOutcomes(w: Writer, outcomes: readonly Outcome[]): void {
  let i = 0;
  while (i < outcomes.length) {
    const run = committedRun(outcomes, i);
    if (run !== undefined) {
      const [count, rows, first, step] = run;
      w.byte(COMMITTED_RUN);
      w.uint(BigInt(count));
      w.uint(rows);
      w.sint(first);
      w.sint(step);
      i += count;
      continue;
    }
    const o = outcomes[i]!;
    if ('Committed' in o) {
      w.byte(COMMITTED);
      w.uint(o.Committed.rows_changed);
      w.sint(o.Committed.last_insert_rowid);
    } else {
      w.byte(FAILED);
      w.sint(BigInt(o.Failed.code));
      w.text(o.Failed.message);
    }
    i += 1;
  }
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

function readOutcomes(r: Reader, maxOutcomes: number): Outcome[] {
  const outcomes: Outcome[] = [];
  while (!r.done()) {
    if (outcomes.length === maxOutcomes) throw r.error(`more than ${maxOutcomes} outcomes`);
    const tag = r.byte('an outcome tag');
    switch (tag) {
      case COMMITTED_RUN: {
        const at = r.offset;
        const count = r.uint('count');
        const rows_changed = r.uint('rows_changed');
        const first = r.sint('first');
        const step = r.sint('step');
        const room = BigInt(maxOutcomes - outcomes.length);
        if (count === 0n || count > room) {
          throw new PackedError(at, `a run of ${count} outcomes (1 to ${room} expected)`);
        }
        const lastRowid = first + step * (count - 1n);
        if (lastRowid < I64_MIN || lastRowid > I64_MAX) {
          throw new PackedError(at, "a run's last rowid is out of the 64-bit range");
        }
        for (let k = 0n; k < count; k++) {
          outcomes.push({ Committed: { rows_changed, last_insert_rowid: first + k * step } });
        }
        continue;
      }
      case COMMITTED: {
        const rows_changed = r.uint('rows_changed');
        outcomes.push({ Committed: { rows_changed, last_insert_rowid: r.sint('last_insert_rowid') } });
        break;
      }
      case FAILED: {
        const at = r.offset;
        const code = r.sint('code');
        if (code < -(2n ** 31n) || code >= 2n ** 31n) throw new PackedError(at, 'code does not fit in 32 bits');
        outcomes.push({ Failed: { code: Number(code), message: r.text('message') } });
        break;
      }
      default:
        r.offset -= 1;
        throw r.error(`unknown outcome tag ${tag}`);
    }
  }
  return outcomes;
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
