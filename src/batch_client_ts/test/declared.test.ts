// The generic codec's checks and refusals, without a canister: an op that is not one of the
// declaration's is refused when it is submitted, naming the write and the parameter, and
// nothing is sent; each BatchRefusal the canister answers is typed, and final or retried as
// the Rust client maps it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { IDL } from '@icp-sdk/core/candid';

import {
  type BatchRefusal,
  BatchError,
  Batcher,
  DeclarationError,
  type DeclaredOp,
  type DeclaredRefusal,
  DeclaredWrites,
  InvalidOpError,
  type Outcome,
  PACKED_WRITES_RESULT,
  type Transport,
  encodeDeclaredReply,
} from '../src/index.js';
import { vectorDeclaration } from './declared_vectors.js';

const codec = new DeclaredWrites(vectorDeclaration());

const numbers = (params: Record<string, unknown>) => ({ write: 'numbers', params }) as DeclaredOp;
const bytes = (params: Record<string, unknown>) => ({ write: 'bytes', params }) as DeclaredOp;
const validNumbers = { a: 1n, b: 0.5, c: null };
const validBytes = { t: 'x', u: null, v: null };

function refused(op: DeclaredOp, write: string, param: string, reason: RegExp): void {
  assert.throws(
    () => codec.check(op),
    (e: unknown) => {
      assert.ok(e instanceof InvalidOpError, String(e));
      assert.deepEqual([e.write, e.param], [write, param], e.message);
      assert.match(e.reason, reason);
      assert.match(e.message, new RegExp(`^op ${write}${param === '' ? '' : `, parameter ${param}`}: `));
      return true;
    },
  );
}

test('an op is checked against its write: name, parameters, types, NULL, ranges, sizes', () => {
  codec.check(numbers(validNumbers));
  codec.check(numbers({ a: -(2n ** 63n), b: -0, c: 2n ** 63n - 1n }));
  codec.check(bytes({ t: 'é'.repeat(8), u: '', v: new Uint8Array(8) }));
  codec.check(bytes({ t: 'x'.repeat(16), u: 'y'.repeat(10_000), v: null }));
  codec.check({ write: 'reset', params: {} });

  refused({ write: 'nope', params: {} }, 'nope', '', /no such write; declaration VectorWrite has numbers, bytes, reset/);
  refused({ write: 'numbers' } as DeclaredOp, 'numbers', '', /params must be an object/);
  refused(numbers({ a: 1n, b: 0.5 }), 'numbers', 'c', /missing/);
  refused(numbers({ ...validNumbers, d: 1n }), 'numbers', 'd', /not a parameter of the write \(declared: a, b, c\)/);
  refused({ write: 'reset', params: { a: 1n } }, 'reset', 'a', /declared: none/);
  refused(numbers({ ...validNumbers, a: 1 }), 'numbers', 'a', /a number; Integer takes a bigint/);
  refused(numbers({ ...validNumbers, b: 1n }), 'numbers', 'b', /a bigint; Real takes a number/);
  refused(numbers({ ...validNumbers, c: '3' }), 'numbers', 'c', /a string; Integer takes a bigint/);
  refused(bytes({ ...validBytes, t: new Uint8Array(1) }), 'bytes', 't', /a Uint8Array; Text takes a string/);
  refused(bytes({ ...validBytes, v: 'ab' }), 'bytes', 'v', /a string; Blob takes a Uint8Array/);
  refused(numbers({ ...validNumbers, a: null }), 'numbers', 'a', /not nullable/);
  refused(numbers({ ...validNumbers, b: Number.NaN }), 'numbers', 'b', /NaN, which binds as NULL/);
  refused(numbers({ ...validNumbers, a: 2n ** 63n }), 'numbers', 'a', /out of the 64-bit signed range/);
  refused(numbers({ ...validNumbers, c: -(2n ** 63n) - 1n }), 'numbers', 'c', /out of the 64-bit signed range/);
  refused(bytes({ ...validBytes, t: 'x'.repeat(17) }), 'bytes', 't', /17 bytes; at most 16/);
  refused(bytes({ ...validBytes, t: 'é'.repeat(9) }), 'bytes', 't', /18 bytes; at most 16/);
  refused(bytes({ ...validBytes, v: new Uint8Array(9) }), 'bytes', 'v', /9 bytes; at most 8/);
  refused(bytes({ ...validBytes, t: 'a\uD800b' }), 'bytes', 't', /lone surrogate/);
});

/** A canister that answers each request with `answer` (called with the request's ops) and counts its calls. */
function fakeCanister(answer: (ops: DeclaredOp[]) => BatchRefusal | Outcome[]): Transport & { calls: number } {
  return {
    calls: 0,
    async call(request: Uint8Array): Promise<Uint8Array> {
      this.calls += 1;
      const [blob] = IDL.decode([IDL.Vec(IDL.Nat8)], request) as unknown as [Uint8Array];
      const { ops } = codec.decodeRequest(Uint8Array.from(blob));
      const result = answer(ops);
      const reply = Array.isArray(result) ? { Ok: encodeDeclaredReply(false, result) } : { Err: result };
      return new Uint8Array(IDL.encode([PACKED_WRITES_RESULT], [reply]));
    },
  };
}

const fast = { maxDelayMs: 1, initialBackoffMs: 1, maxBackoffMs: 2 };

test('an invalid op is refused at submit and nothing is sent; its valid neighbours are', async () => {
  const canister = fakeCanister((ops) => ops.map((_, i) => ({ Committed: { rows_changed: 1n, last_insert_rowid: BigInt(i + 1) } })));
  // One batch, sent by close(): a delay of 1 ms on the real clock may pass between two submits.
  const batcher = new Batcher(codec, canister, { ...fast, maxDelayMs: 60_000 });
  const good = batcher.trySubmit(numbers(validNumbers));
  assert.throws(() => batcher.trySubmit(numbers({ ...validNumbers, a: 1 })), InvalidOpError);
  await assert.rejects(batcher.submit(bytes({ ...validBytes, t: 'x'.repeat(17) })), InvalidOpError);
  const good2 = batcher.trySubmit(bytes(validBytes));
  await batcher.close();
  assert.deepEqual(await Promise.all([good, good2]), [
    { Committed: { rows_changed: 1n, last_insert_rowid: 1n } },
    { Committed: { rows_changed: 1n, last_insert_rowid: 2n } },
  ]);
  assert.equal(canister.calls, 1);
  assert.equal(batcher.stats().submitted, 2);
});

test('an op is packed as it was when submitted', async () => {
  const seen: DeclaredOp[][] = [];
  const canister = fakeCanister((ops) => {
    seen.push(ops);
    return ops.map(() => ({ Committed: { rows_changed: 1n, last_insert_rowid: 1n } }));
  });
  const batcher = new Batcher(codec, canister, fast);
  // One op object submitted, changed, submitted again, changed: each submission is sent as it was.
  const params = { ...validNumbers };
  const op = numbers(params);
  const first = batcher.trySubmit(op);
  params.a = 99n;
  const blob = new Uint8Array([1, 2]);
  const second = batcher.trySubmit(op);
  const third = batcher.trySubmit(bytes({ ...validBytes, v: blob }));
  params.a = 7n;
  blob[0] = 9;
  await batcher.close();
  await Promise.all([first, second, third]);
  // What was sent, in order, whichever batches the linger timer made of it.
  assert.deepEqual(seen.flat(), [
    { write: 'numbers', params: validNumbers },
    { write: 'numbers', params: { ...validNumbers, a: 99n } },
    { write: 'bytes', params: { ...validBytes, v: new Uint8Array([1, 2]) } },
  ]);
});

const writeError = {
  TooOld: { TooOld: { created_at_time: 1n, now: 2n, oldest_accepted: 3n } },
  CreatedInFuture: { CreatedInFuture: { created_at_time: 3n, now: 2n, newest_accepted: 2n } },
  DigestMismatch: { DigestMismatch: { created_at_time: 1n } },
  StoreFull: { StoreFull: { keys_held: 1n, max_keys: 1n, bytes_held: 1n, max_bytes: 1n, share: { Caller: null } } },
  Database: { Database: 'cannot begin' },
  QueueFull: { QueueFull: { capacity: 1n } },
  QueueBytesFull: { QueueBytesFull: { pending_bytes: 1n, capacity_bytes: 1n } },
  Invalid: { Invalid: 'too many ops' },
  NotAuthorized: { NotAuthorized: null },
} as const;

// A refusal's fields are described in the order the Candid decoder gives them (by field hash).
test("each BatchRefusal is decoded, described, and final or retried as the Rust client's mapping", () => {
  const digest = (b: number) => new Uint8Array(8).fill(b);
  const cases: [BatchRefusal, DeclaredRefusal['name'], string, string][] = [
    [{ NotAuthorized: null }, 'NotAuthorized', 'final', 'NotAuthorized'],
    [{ InvalidParam: { op: 3n, write: 'bytes', param: 't', reason: '17 bytes; at most 16' } }, 'InvalidParam', 'final', 'InvalidParam: op 3 (bytes, parameter t): 17 bytes; at most 16'],
    [
      { DeclarationMismatch: { canister: digest(0xab), request: digest(0x01) } },
      'DeclarationMismatch',
      'final',
      'DeclarationMismatch: the canister\'s writes are declaration abababababababab, the request was packed for declaration 0101010101010101',
    ],
    [{ Malformed: { offset: 33n, what: 'write index 3; the declaration has 3 writes' } }, 'Malformed', 'final', 'Malformed: byte 33: write index 3; the declaration has 3 writes'],
    [{ Refused: writeError.TooOld }, 'Refused', 'tooOld', 'Refused: TooOld: now 2, created_at_time 1, oldest_accepted 3'],
    [{ Refused: writeError.StoreFull }, 'Refused', 'retry', 'Refused: StoreFull: max_keys 1, keys_held 1, share Caller, bytes_held 1, max_bytes 1'],
    [{ Refused: writeError.Database }, 'Refused', 'retry', 'Refused: Database: cannot begin'],
    [{ Refused: writeError.QueueFull }, 'Refused', 'retry', 'Refused: QueueFull: capacity 1'],
    [{ Refused: writeError.QueueBytesFull }, 'Refused', 'retry', 'Refused: QueueBytesFull: capacity_bytes 1, pending_bytes 1'],
    [{ Refused: writeError.CreatedInFuture }, 'Refused', 'final', 'Refused: CreatedInFuture: now 2, newest_accepted 2, created_at_time 3'],
    [{ Refused: writeError.DigestMismatch }, 'Refused', 'final', 'Refused: DigestMismatch: created_at_time 1'],
    [{ Refused: writeError.Invalid }, 'Refused', 'final', 'Refused: Invalid: too many ops'],
    [{ Refused: writeError.NotAuthorized }, 'Refused', 'final', 'Refused: NotAuthorized'],
  ];
  for (const [refusal, name, kind, text] of cases) {
    const reply = codec.decode(new Uint8Array(IDL.encode([PACKED_WRITES_RESULT], [{ Err: refusal }])), 1);
    assert.equal(reply.kind, 'refused');
    if (reply.kind !== 'refused') continue;
    assert.equal(reply.refusal.name, name);
    assert.deepEqual(reply.refusal.refusal, refusal);
    assert.equal(codec.refusalKind(reply.refusal), kind, text);
    assert.equal(codec.describe(reply.refusal), text);
  }
});

test('a final refusal rejects every op of the batch after one attempt; a retried one is sent again with the same bytes', async () => {
  const mismatch: BatchRefusal = { DeclarationMismatch: { canister: new Uint8Array(8), request: codec.declaration.digest } };
  const finalCanister = fakeCanister(() => mismatch);
  const b1 = new Batcher(codec, finalCanister, fast);
  const ops = [b1.trySubmit(numbers(validNumbers)), b1.trySubmit({ write: 'reset', params: {} })];
  await b1.close();
  for (const r of await Promise.allSettled(ops)) {
    assert.equal(r.status, 'rejected');
    const e = (r as PromiseRejectedResult).reason as BatchError<DeclaredRefusal>;
    assert.ok(e instanceof BatchError);
    assert.equal(e.kind, 'refused');
    assert.deepEqual(e.refusal?.refusal, mismatch);
  }
  assert.equal(finalCanister.calls, 1);

  const requests: string[] = [];
  let answers = 0;
  const busy = fakeCanister((ops) =>
    answers++ < 2 ? { Refused: writeError.StoreFull } : ops.map(() => ({ Committed: { rows_changed: 1n, last_insert_rowid: 5n } })),
  );
  const recording: Transport = {
    call: (request, signal) => {
      requests.push(Buffer.from(request).toString('hex'));
      return busy.call(request, signal);
    },
  };
  const b2 = new Batcher(codec, recording, fast);
  const outcome = b2.trySubmit(numbers(validNumbers));
  await b2.close();
  assert.deepEqual(await outcome, { Committed: { rows_changed: 1n, last_insert_rowid: 5n } });
  assert.equal(requests.length, 3);
  assert.equal(new Set(requests).size, 1, 'each attempt sends the same request, with the same key');
});

test('a declaration whose digest is not its writes\' is refused', () => {
  const view = vectorDeclaration();
  assert.throws(() => new DeclaredWrites({ ...view, digest: new Uint8Array(8) }), DeclarationError);
  const changed = { ...view, writes: view.writes.map((w) => (w.name === 'reset' ? { ...w, sql: 'DELETE FROM b' } : w)) };
  assert.throws(() => new DeclaredWrites(changed), /its writes give/);
});
