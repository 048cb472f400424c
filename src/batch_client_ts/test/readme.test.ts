// The README's example is this package's test/readme_declared_example.ts, verbatim,
// type-checked by `tsc`, and run here against a simulated canister (and against the todo store
// on the replica: declared_e2e.test.ts).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { IDL } from '@icp-sdk/core/candid';

import { Batcher } from '../src/batcher.js';
import {
  type BatchRefusal,
  type DeclarationView,
  DeclaredWrites,
  InvalidOpError,
  PACKED_WRITES_RESULT,
  type WriteView,
  BatchError,
  declarationDigest,
  encodeDeclaredReply,
} from '../src/index.js';
import { type TodoOp, addTodo } from './readme_declared_example.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

test('the README shows test/readme_declared_example.ts verbatim', () => {
  const example = readFileSync(new URL('../../test/readme_declared_example.ts', import.meta.url), 'utf8').replace(
    "from '../src/index.js'",
    "from 'ic-batch-client'",
  );
  assert.ok(readme.includes(example), 'README.md must contain test/readme_declared_example.ts (with the package import)');
});

/** A todo store's declaration (examples/todo_canister's writes). */
function todoDeclaration(): DeclarationView {
  const writes: WriteView[] = [
    {
      name: 'add',
      sql: 'INSERT INTO todos (title, due_ns) VALUES (?1, ?2)',
      access: 'Writers',
      params: [
        { name: 'title', kind: 'Text', nullable: false, max_bytes: 200 },
        { name: 'due_ns', kind: 'Integer', nullable: true, max_bytes: null },
      ],
    },
    { name: 'complete', sql: 'UPDATE todos SET done = 1 WHERE id = ?1', access: 'Writers', params: [{ name: 'id', kind: 'Integer', nullable: false, max_bytes: null }] },
  ];
  return { name: 'TodoWrite', digest: declarationDigest(writes), writes };
}

test('the declared example adds todos through a batcher; an invalid one is refused before sending; a changed canister says so', async () => {
  const codec = new DeclaredWrites<TodoOp>(todoDeclaration());
  let rows = 0n;
  const sent: TodoOp[][] = [];
  let refusal: BatchRefusal | undefined;
  const canister = {
    async call(request: Uint8Array): Promise<Uint8Array> {
      const [blob] = IDL.decode([IDL.Vec(IDL.Nat8)], request) as unknown as [Uint8Array];
      const { ops } = codec.decodeRequest(Uint8Array.from(blob));
      sent.push(ops as TodoOp[]);
      const reply =
        refusal !== undefined
          ? { Err: refusal }
          : { Ok: encodeDeclaredReply(false, ops.map(() => ({ Committed: { rows_changed: 1n, last_insert_rowid: ++rows } }))) };
      return new Uint8Array(IDL.encode([PACKED_WRITES_RESULT], [reply]));
    },
  };
  const batcher = new Batcher(codec, canister);
  const ids = await Promise.all([addTodo(batcher, 'milk'), addTodo(batcher, 'bread', 1_700_000_000_000_000_000n)]);
  assert.deepEqual(ids, [1n, 2n]);
  assert.deepEqual(sent, [
    [
      { write: 'add', params: { title: 'milk', due_ns: null } },
      { write: 'add', params: { title: 'bread', due_ns: 1_700_000_000_000_000_000n } },
    ],
  ]);
  await assert.rejects(addTodo(batcher, 'x'.repeat(201)), (e: unknown) => e instanceof InvalidOpError && e.param === 'title');
  assert.equal(sent.length, 1, 'nothing sent for the invalid todo');
  refusal = { DeclarationMismatch: { canister: new Uint8Array(8).fill(1), request: codec.declaration.digest } };
  await assert.rejects(addTodo(batcher, 'eggs'), (e: unknown) => e instanceof BatchError && e.refusal?.name === 'DeclarationMismatch');
  await batcher.close();
});
