// The shared test vectors of the generic packed format, written by the Rust side
// (src/batch_types/testdata/declared_vectors.json): the declaration's digest recomputed here,
// every request and reply encoded to its exact bytes and decoded back, every request the
// canister's reader refuses refused at the same byte for the same reason.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { IDL } from '@icp-sdk/core/candid';

import {
  BLOB,
  type DeclaredOp,
  DeclaredWrites,
  type Outcome,
  PACKED_WRITES_RESULT,
  PackedError,
  type ParamValue,
  declarationDigest,
  decodeDeclaredReply,
  encodeDeclaredReply,
} from '../src/index.js';
import { type JsonValue, hex, unhex, vectorDeclaration, vectors } from './declared_vectors.js';


const codec = new DeclaredWrites(vectorDeclaration());

/** A vector's op, its values typed by the declaration (integers as bigints, blobs as bytes). */
function op(json: { write: string; params: Record<string, JsonValue> }): DeclaredOp {
  const write = vectors.declaration.writes.find((w) => w.name === json.write);
  assert.ok(write, json.write);
  const params: Record<string, ParamValue> = {};
  for (const [name, value] of Object.entries(json.params)) {
    const kind = write.params.find((p) => p.name === name)?.kind;
    params[name] = value === null ? null : kind === 'Integer' ? BigInt(value) : kind === 'Blob' ? unhex(value as string) : value;
  }
  return { write: json.write, params };
}

function outcome(json: Record<string, Record<string, string | number>>): Outcome {
  const c = json.Committed;
  if (c !== undefined) {
    return { Committed: { rows_changed: BigInt(c.rows_changed!), last_insert_rowid: BigInt(c.last_insert_rowid!) } };
  }
  if ('NotExecuted' in json) return { NotExecuted: null };
  return { Failed: { code: json.Failed!.code as number, message: json.Failed!.message as string } };
}

test("the declaration's digest is the one its writes give here", () => {
  assert.equal(hex(declarationDigest(codec.declaration.writes)), vectors.declaration.digest);
  assert.equal(codec.digestHex, vectors.declaration.digest);
});

test('every request encodes to its exact bytes and decodes to its key and ops', () => {
  assert.ok(vectors.requests.length >= 3);
  for (const [i, v] of vectors.requests.entries()) {
    const ops = v.ops.map(op);
    const key = { createdAtTimeNs: BigInt(v.key.created_at_time_ns), id: unhex(v.key.id) };
    const bytes = codec.encodeRequest(key, ops);
    assert.equal(hex(bytes), v.bytes, `request ${i}`);
    assert.equal(ops.reduce((n, o) => n + codec.opLen(o), 33), bytes.length, `request ${i}: opLen`);
    assert.equal(hex(codec.encode(key, ops)), v.argument, `request ${i}: the Candid argument, as the canister's strict decoder reads it`);
    const [blob] = IDL.decode([BLOB], codec.encode(key, ops)) as unknown as [Uint8Array];
    assert.equal(hex(Uint8Array.from(blob)), v.bytes, `request ${i}: the Candid argument carries the bytes`);
    assert.ok(codec.encode(key, ops).length <= codec.headerLen + bytes.length - 33, `request ${i}: headerLen bounds the framing`);
    const decoded = codec.decodeRequest(unhex(v.bytes));
    assert.equal(hex(decoded.digest), vectors.declaration.digest);
    assert.equal(decoded.key.createdAtTimeNs, key.createdAtTimeNs);
    assert.equal(hex(decoded.key.id), v.key.id);
    assert.deepEqual(decoded.ops, ops, `request ${i}: ops`);
  }
});

test('every reply encodes to its exact bytes and decodes to its outcomes, through Candid too', () => {
  assert.ok(vectors.replies.length >= 4);
  for (const [i, v] of vectors.replies.entries()) {
    const outcomes = v.outcomes.map(outcome);
    assert.equal(hex(encodeDeclaredReply(v.duplicate, outcomes)), v.bytes, `reply ${i}`);
    assert.deepEqual(decodeDeclaredReply(unhex(v.bytes), outcomes.length), { duplicate: v.duplicate, outcomes }, `reply ${i}`);
    const candid = new Uint8Array(IDL.encode([PACKED_WRITES_RESULT], [{ Ok: unhex(v.bytes) }]));
    assert.deepEqual(codec.decode(candid, outcomes.length), { kind: 'executed', duplicate: v.duplicate, outcomes }, `reply ${i}`);
    if (outcomes.length > 0) {
      assert.throws(() => decodeDeclaredReply(unhex(v.bytes), outcomes.length - 1), PackedError, `reply ${i}: more outcomes than ops`);
    }
  }
});

test("every request the canister's reader refuses is refused here at the same byte, for the same reason", () => {
  assert.ok(vectors.refused.length >= 6);
  for (const v of vectors.refused) {
    assert.throws(
      () => codec.decodeRequest(unhex(v.bytes)),
      (e: unknown) => {
        assert.ok(e instanceof PackedError, String(e));
        assert.equal(e.offset, v.offset, v.what);
        // The UTF-8 decoders word their detail differently; the reason before it is the same.
        const utf8 = / is not UTF-8: /;
        if (utf8.test(v.what)) assert.equal(e.what.split(utf8)[0], v.what.split(utf8)[0]);
        else assert.equal(e.what, v.what);
        return true;
      },
    );
  }
});
