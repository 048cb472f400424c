/**
 * The primitives both packed formats share (the reference canister's, `packed.ts`, and the
 * generic one of declared writes, `declared.ts`): varints, zigzag, little-endian floats,
 * length-prefixed text and bytes, and the outcome records (one committed, one failed, a run of
 * committed outcomes, a failure repeated, ops not executed). Internal to the package: its public
 * names are re-exported where used.
 */
import type { Outcome } from './types.js';

const COMMITTED = 0;
const FAILED = 1;
const COMMITTED_RUN = 2;
const FAILED_REPEAT = 3;
const NOT_EXECUTED = 4;
/** The shortest run {@link putOutcomes} writes as one record. */
const MIN_RUN = 3;

export const I64_MIN = -(1n << 63n);
export const I64_MAX = (1n << 63n) - 1n;
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

export const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

export class Writer {
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

  /** A length-prefixed byte string. */
  blob(value: Uint8Array): void {
    this.uint(BigInt(value.length));
    this.raw(value);
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

export class Reader {
  offset = 0;
  private readonly view: DataView;

  /**
   * `textErrorAtLength`: a text that is not UTF-8 is refused at its length prefix (the generic
   * format's reader) rather than at its first byte (the reference canister's).
   */
  constructor(
    readonly bytes: Uint8Array,
    private readonly textErrorAtLength = false,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  done(): boolean {
    return this.offset === this.bytes.length;
  }

  error(what: string): PackedError {
    return new PackedError(this.offset, what);
  }

  static withVersion(bytes: Uint8Array, version: number, textErrorAtLength = false): Reader {
    const r = new Reader(bytes, textErrorAtLength);
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
      if ((b & 0x80) === 0) {
        // A last byte of 0 after others adds nothing: a padded encoding, refused.
        if (i > 0 && b === 0) {
          this.offset = start;
          throw this.error(`${what}: varint ${n} padded to ${i + 1} bytes (not its shortest form)`);
        }
        return n;
      }
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

  /** A length-prefixed byte string. */
  bytesField(what: string): Uint8Array {
    const len = this.uint(what);
    if (BigInt(this.offset) + len > BigInt(this.bytes.length)) {
      throw this.error(`${what}: ${len} bytes expected, the input ended`);
    }
    return this.array(Number(len), what);
  }

  text(what: string): string {
    const prefix = this.offset;
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
      if (this.textErrorAtLength) this.offset = prefix;
      throw this.error(`${what} is not UTF-8: ${String(e)}`);
    }
    this.offset = end;
    return text;
  }
}

export function uintLen(n: bigint): number {
  let len = 1;
  while (n >= 0x80n) {
    n >>= 7n;
    len += 1;
  }
  return len;
}

export const zigzag = (n: bigint): bigint => BigInt.asUintN(64, (n << 1n) ^ (n >> 63n));

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

export function putOutcomes(w: Writer, outcomes: readonly Outcome[]): void {
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
      i += 1;
      continue;
    }
    const count = repeats(outcomes, i);
    if ('NotExecuted' in o) {
      w.byte(NOT_EXECUTED);
      w.uint(BigInt(count));
    } else {
      if (count === 1) {
        w.byte(FAILED);
      } else {
        w.byte(FAILED_REPEAT);
        w.uint(BigInt(count));
      }
      w.sint(BigInt(o.Failed.code));
      w.text(o.Failed.message);
    }
    i += count;
  }
}

/** How many outcomes from `i` on equal the one at `i` (a failure, or not executed). */
function repeats(outcomes: readonly Outcome[], i: number): number {
  const same = (a: Outcome, b: Outcome): boolean =>
    'NotExecuted' in a
      ? 'NotExecuted' in b
      : 'Failed' in a && 'Failed' in b && a.Failed.code === b.Failed.code && a.Failed.message === b.Failed.message;
  let end = i + 1;
  while (end < outcomes.length && same(outcomes[i]!, outcomes[end]!)) end += 1;
  return end - i;
}

/** A record's `count` of outcomes: 1 to `room`. */
function runLength(r: Reader, room: number): number {
  const at = r.offset;
  const count = r.uint('count');
  if (count === 0n || count > BigInt(room)) {
    throw new PackedError(at, `a run of ${count} outcomes (1 to ${room} expected)`);
  }
  return Number(count);
}

export function readOutcomes(r: Reader, maxOutcomes: number): Outcome[] {
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
      case FAILED:
      case FAILED_REPEAT: {
        const count = tag === FAILED_REPEAT ? runLength(r, maxOutcomes - outcomes.length) : 1;
        const at = r.offset;
        const code = r.sint('code');
        if (code < -(2n ** 31n) || code >= 2n ** 31n) throw new PackedError(at, 'code does not fit in 32 bits');
        const message = r.text('message');
        for (let k = 0; k < count; k++) outcomes.push({ Failed: { code: Number(code), message } });
        break;
      }
      case NOT_EXECUTED: {
        const count = runLength(r, maxOutcomes - outcomes.length);
        for (let k = 0; k < count; k++) outcomes.push({ NotExecuted: null });
        break;
      }
      default:
        r.offset -= 1;
        throw r.error(`unknown outcome tag ${tag}`);
    }
  }
  return outcomes;
}

