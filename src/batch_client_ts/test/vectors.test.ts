// The shared test vectors of the reference canister's packed codec (test/reference/packed.ts), written by the Rust codec
// (src/bench_api/testdata/packed_vectors.json): every encoding must be byte-identical, every
// decoding must give the value back, every refusal must happen at the same byte.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import {
  type Outcome,
  PackedError,
  type UserOrderOp,
  decodeKeyedOps,
  decodeKeyedOutcomes,
  decodeOps,
  decodeOutcomes,
  encodeKeyedOps,
  encodeKeyedOutcomes,
  encodeOps,
  encodeOutcomes,
  opLen,
} from './reference/packed.js';

interface Vectors {
  ops: { name: string; key: { created_at_time_ns: string; id: string } | null; ops: Record<string, Record<string, string>>[]; hex: string }[];
  outcomes: { name: string; keyed: { duplicate: boolean } | null; outcomes: Record<string, Record<string, string | number>>[]; hex: string }[];
  refused: { name: string; decoder: string; max: number; hex: string; offset: number }[];
}

const vectors = JSON.parse(
  readFileSync(new URL('../../../bench_api/testdata/packed_vectors.json', import.meta.url), 'utf8'),
) as Vectors;

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const unhex = (text: string) => new Uint8Array(Buffer.from(text, 'hex'));

function float(bits: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${bits}`));
  return view.getFloat64(0);
}

function bits(value: number): string {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value);
  return view.getBigUint64(0).toString(16).padStart(16, '0');
}

function op(json: Record<string, Record<string, string>>): UserOrderOp {
  const [[name, f]] = Object.entries(json) as [[string, Record<string, string>]];
  switch (name) {
    case 'CreateOrder':
      return { CreateOrder: { user_id: BigInt(f.user_id!), amount: float(f.amount_bits!) } };
    case 'UpdateOrderAmount':
      return { UpdateOrderAmount: { order_id: BigInt(f.order_id!), amount: float(f.amount_bits!) } };
    case 'DeleteUserOrders':
      return { DeleteUserOrders: { user_id: BigInt(f.user_id!) } };
    default:
      return { CreateUser: { username: f.username!, email: f.email! } };
  }
}

/** An op as comparable data, floats by their bits. */
function exact(o: UserOrderOp): unknown {
  if ('CreateOrder' in o) return ['CreateOrder', o.CreateOrder.user_id, bits(o.CreateOrder.amount)];
  if ('UpdateOrderAmount' in o) return ['UpdateOrderAmount', o.UpdateOrderAmount.order_id, bits(o.UpdateOrderAmount.amount)];
  return o;
}

function outcome(json: Record<string, Record<string, string | number>>): Outcome {
  const committed = json.Committed;
  if (committed !== undefined) {
    return {
      Committed: {
        rows_changed: BigInt(committed.rows_changed as string),
        last_insert_rowid: BigInt(committed.last_insert_rowid as string),
      },
    };
  }
  if ('NotExecuted' in json) return { NotExecuted: null };
  const failed = json.Failed!;
  return { Failed: { code: failed.code as number, message: failed.message as string } };
}

test('every ops vector encodes to its exact bytes and decodes to its ops, bit for bit', () => {
  assert.ok(vectors.ops.length >= 8);
  for (const v of vectors.ops) {
    const ops = v.ops.map(op);
    const bytes = v.key === null
      ? encodeOps(ops)
      : encodeKeyedOps({ createdAtTimeNs: BigInt(v.key.created_at_time_ns), id: unhex(v.key.id) }, ops);
    assert.equal(hex(bytes), v.hex, v.name);
    const header = v.key === null ? 1 : 25;
    assert.equal(ops.reduce((sum, o) => sum + opLen(o), header), bytes.length, v.name);
    if (v.key === null) {
      assert.deepEqual(decodeOps(unhex(v.hex), ops.length).map(exact), ops.map(exact), v.name);
    } else {
      const decoded = decodeKeyedOps(unhex(v.hex), ops.length);
      assert.equal(decoded.key.createdAtTimeNs, BigInt(v.key.created_at_time_ns), v.name);
      assert.equal(hex(decoded.key.id), v.key.id, v.name);
      assert.deepEqual(decoded.ops.map(exact), ops.map(exact), v.name);
    }
  }
});

test('every outcomes vector encodes to its exact bytes and decodes to its outcomes', () => {
  assert.ok(vectors.outcomes.length >= 8);
  for (const v of vectors.outcomes) {
    const outcomes = v.outcomes.map(outcome);
    const bytes = v.keyed === null ? encodeOutcomes(outcomes) : encodeKeyedOutcomes(v.keyed.duplicate, outcomes);
    assert.equal(hex(bytes), v.hex, v.name);
    if (v.keyed === null) {
      assert.deepEqual(decodeOutcomes(unhex(v.hex), outcomes.length), outcomes, v.name);
    } else {
      assert.deepEqual(decodeKeyedOutcomes(unhex(v.hex), outcomes.length), { duplicate: v.keyed.duplicate, outcomes }, v.name);
    }
  }
});

test('every refused vector is refused at the same byte', () => {
  assert.ok(vectors.refused.length >= 15);
  const decoders: Record<string, (bytes: Uint8Array, max: number) => unknown> = {
    ops: decodeOps,
    keyed_ops: decodeKeyedOps,
    outcomes: decodeOutcomes,
    keyed_outcomes: decodeKeyedOutcomes,
  };
  for (const v of vectors.refused) {
    const decode = decoders[v.decoder];
    assert.ok(decode, v.decoder);
    assert.throws(
      () => decode(unhex(v.hex), v.max),
      (error: unknown) => error instanceof PackedError && error.offset === v.offset,
      v.name,
    );
  }
});
