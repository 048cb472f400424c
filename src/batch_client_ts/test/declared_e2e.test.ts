// The generic codec against a canister it has no code for: the example todo store
// (examples/todo_canister, target/canister/todo_canister.wasm) on the offline replica, its
// declaration fetched with its `batch_declaration` query. A thousand ops through the batcher
// with a reply lost after the commit, each applied once (read back with the canister's `todos`
// query); the canister's refusals as typed values (a request packed for another declaration,
// a parameter past its limit the client did not check, bytes that are not a request), a
// stranger's batch rejected before it runs, an op the database refuses failing alone.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Actor, type HttpAgent } from '@icp-sdk/core/agent';
import { IDL } from '@icp-sdk/core/candid';
import type { Principal } from '@icp-sdk/core/principal';

import {
  AgentTransport,
  BLOB,
  BatchError,
  Batcher,
  type DeclarationView,
  type DeclaredRefusal,
  DeclaredWrites,
  InvalidOpError,
  type Outcome,
  PackedError,
  type ParamView,
  RejectCode,
  declarationDigest,
} from '../src/index.js';
import { addTodo, connect } from './readme_declared_example.js';
import { type Replica, canisterWasm, deploy, hook, newAgent, startReplica } from './replica.js';

const wasm = canisterWasm('todo_canister');
let replica: Replica | undefined;
let url = '';

before(async () => {
  replica = await startReplica({ 'the todo canister (scripts/build_example.sh)': wasm });
  url = replica.url;
});
after(() => replica?.stop());

/** The todo store's writes, as its `.did` declares them. */
type TodoOp =
  | { write: 'add'; params: { title: string; due_ns: bigint | null } }
  | { write: 'complete'; params: { id: bigint } }
  | { write: 'purge_done'; params: Record<string, never> };

interface Todo {
  id: bigint;
  title: string;
  due_ns: [] | [bigint];
  done: boolean;
}

const todosIdl: IDL.InterfaceFactory = ({ IDL }) => {
  const Todo = IDL.Record({ id: IDL.Int64, title: IDL.Text, due_ns: IDL.Opt(IDL.Int64), done: IDL.Bool });
  return IDL.Service({
    todos: IDL.Func([IDL.Int64], [IDL.Variant({ Ok: IDL.Vec(Todo), Err: IDL.Variant({ Database: IDL.Text }) })], ['query']),
  });
};

interface Store {
  agent: HttpAgent;
  canisterId: Principal;
  codec: DeclaredWrites<TodoOp>;
  /** Every todo, read 100 at a time by `id > after`. */
  todos(): Promise<Todo[]>;
}

/** A fresh todo store, installed by the identity that then writes, and the codec of its declaration. */
async function store(): Promise<Store> {
  const agent = await newAgent(url);
  const canisterId = await deploy(agent, wasm);
  const codec = await DeclaredWrites.fetch<TodoOp>(agent, canisterId);
  const actor = Actor.createActor(todosIdl, { agent, canisterId });
  const todos = async () => {
    const all: Todo[] = [];
    for (;;) {
      const page = (await actor.todos!(all.at(-1)?.id ?? 0n)) as { Ok: Todo[] } | { Err: unknown };
      if (!('Ok' in page)) throw new Error(`todos: ${JSON.stringify(page.Err)}`);
      all.push(...page.Ok);
      if (page.Ok.length < 100) return all;
    }
  };
  return { agent, canisterId, codec, todos };
}

const config = { maxDelayMs: 60_000, attemptTimeoutMs: 5_000, initialBackoffMs: 50, maxBackoffMs: 500 };

function batcher(s: Store, codec: DeclaredWrites<TodoOp> = s.codec, agent: HttpAgent = s.agent, maxBatchOps = 10_000) {
  return new Batcher(codec, new AgentTransport(agent, s.canisterId, 'execute_writes_packed'), { ...config, maxBatchOps });
}

/** Each op's rejection, which must be a refusal of its batch. */
async function refusals(outcomes: Promise<Outcome>[]): Promise<DeclaredRefusal[]> {
  const settled = await Promise.allSettled(outcomes);
  return settled.map((r) => {
    assert.equal(r.status, 'rejected', 'the op was refused');
    const e = (r as PromiseRejectedResult).reason as unknown;
    assert.ok(e instanceof BatchError, String(e));
    assert.equal(e.kind, 'refused', e.message);
    return e.refusal as DeclaredRefusal;
  });
}

/** Submits `ops` as one batch, closes the batcher, and resolves to their outcomes. */
async function run(b: Batcher<TodoOp, Outcome, DeclaredRefusal>, ops: TodoOp[]): Promise<Outcome[]> {
  const outcomes = ops.map((op) => b.trySubmit(op));
  b.flush();
  await b.close();
  return Promise.all(outcomes);
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

test("the codec is built from the canister's declaration: its writes, their parameters, its digest", async () => {
  const { codec } = await store();
  const d = codec.declaration;
  assert.equal(d.name, 'TodoWrite');
  assert.deepEqual(
    d.writes.map((w) => [w.name, w.access, w.params.map((p) => [p.name, p.kind, p.nullable, p.max_bytes])]),
    [
      ['add', 'Writers', [['title', 'Text', false, 200], ['due_ns', 'Integer', true, null]]],
      ['complete', 'Writers', [['id', 'Integer', false, null]]],
      ['purge_done', 'Controllers', []],
      ['rename', 'Writers', [['id', 'Integer', false, null], ['title', 'Text', false, 200]]],
    ],
  );
  assert.equal(d.writes[0]!.sql, 'INSERT INTO todos (title, due_ns) VALUES (?1, ?2)');
  assert.equal(hex(declarationDigest(d.writes)), hex(d.digest), "the client's digest of the writes is the canister's");
});

test('1,000 ops through the batcher, a reply lost after its commit: every op applied exactly once', async () => {
  const s = await store();
  await hook(url, 'drop_replies', { count: 1 });
  const b = batcher(s, s.codec, s.agent, 250);
  const due = (i: number) => (i % 3 === 0 ? null : BigInt(i - 500) * 3_600_000_000_000n);
  const ops: TodoOp[] = Array.from({ length: 1_000 }, (_, i) => ({ write: 'add', params: { title: `todo ${i} ✓`, due_ns: due(i) } }));
  const outcomes = ops.map((op) => b.trySubmit(op));
  b.flush();
  await b.close();
  const results = await Promise.all(outcomes);
  const st = b.stats();
  assert.deepEqual([st.batches, st.attempts, st.retries, st.duplicateReplies, st.outcomes], [4, 5, 1, 1, 1_000]);

  const todos = await s.todos();
  assert.equal(todos.length, 1_000, 'one row per op');
  const byId = new Map(todos.map((t) => [t.id, t]));
  results.forEach((r, i) => {
    assert.ok('Committed' in r, `op ${i}: ${JSON.stringify(r, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
    assert.equal(r.Committed.rows_changed, 1n);
    const row = byId.get(r.Committed.last_insert_rowid);
    assert.ok(row, `op ${i}'s row ${r.Committed.last_insert_rowid}`);
    const d = due(i);
    assert.deepEqual([row.title, row.due_ns, row.done], [`todo ${i} ✓`, d === null ? [] : [d], false], `op ${i}`);
    byId.delete(r.Committed.last_insert_rowid);
  });
  assert.equal(byId.size, 0, 'no row without its op');

  // Complete ten, then purge them with the controllers-only write (this identity installed it).
  const completed = await run(batcher(s), todos.slice(0, 10).map((t): TodoOp => ({ write: 'complete', params: { id: t.id } })));
  assert.ok(completed.every((o) => 'Committed' in o && o.Committed.rows_changed === 1n), 'each complete changed its row');
  const [purged] = await run(batcher(s), [{ write: 'purge_done', params: {} }]);
  assert.ok(purged && 'Committed' in purged && purged.Committed.rows_changed === 10n, 'the purge deleted the ten done');
  const left = await s.todos();
  assert.deepEqual(left.map((t) => t.id), todos.slice(10).map((t) => t.id));
});

/** A fresh key now. */
function freshKey() {
  const id = new Uint8Array(16);
  globalThis.crypto.getRandomValues(id);
  return { createdAtTimeNs: BigInt(Date.now()) * 1_000_000n, id };
}

/** Sends the packed `request` to `execute_writes_packed` once, and reads the reply as `codec` does. */
async function sendOnce(s: Store, request: Uint8Array, ops: number) {
  const reply = await new AgentTransport(s.agent, s.canisterId, 'execute_writes_packed').call(new Uint8Array(IDL.encode([BLOB], [request])));
  return s.codec.decode(reply, ops);
}

/** `view` with write `write`'s parameter `param` changed as `change` says, its digest recomputed. */
function changed(view: DeclarationView, write: string, param: string, change: Partial<ParamView>): DeclarationView {
  const writes = view.writes.map((w) =>
    w.name !== write ? w : { ...w, params: w.params.map((p) => (p.name === param ? { ...p, ...change } : p)) },
  );
  return { ...view, writes, digest: declarationDigest(writes) };
}

test('a request packed for another declaration is refused DeclarationMismatch with both digests, and nothing runs', async () => {
  const s = await store();
  // A client built against an older canister, whose titles were at most 100 bytes.
  const stale = new DeclaredWrites<TodoOp>(changed(s.codec.declaration, 'add', 'title', { max_bytes: 100 }));
  assert.notEqual(stale.digestHex, s.codec.digestHex);
  const b = batcher(s, stale);
  const ops: TodoOp[] = [
    { write: 'add', params: { title: 'milk', due_ns: null } },
    { write: 'complete', params: { id: 1n } },
  ];
  const outcomes = ops.map((op) => b.trySubmit(op));
  b.flush();
  await b.close();
  for (const r of await refusals(outcomes)) {
    assert.equal(r.name, 'DeclarationMismatch');
    assert.ok('DeclarationMismatch' in r.refusal);
    const { canister, request } = r.refusal.DeclarationMismatch;
    assert.deepEqual([hex(canister), hex(request)], [s.codec.digestHex, stale.digestHex]);
  }
  assert.equal(b.stats().attempts, 1, 'final: not retried');

  // The same ops under a digest no declaration has.
  const wrong = s.codec.encodeRequest(freshKey(), ops);
  wrong.set(new Uint8Array(8).fill(0xee), 1);
  const reply = await sendOnce(s, wrong, ops.length);
  assert.deepEqual(
    reply.kind === 'refused' && 'DeclarationMismatch' in reply.refusal.refusal
      ? [hex(reply.refusal.refusal.DeclarationMismatch.canister), hex(reply.refusal.refusal.DeclarationMismatch.request)]
      : reply,
    [s.codec.digestHex, 'ee'.repeat(8)],
  );
  assert.deepEqual(await s.todos(), []);
});

test("the canister's own refusals: a parameter past its limit, bytes that are not a request, a stranger; a failing op fails alone", async () => {
  const s = await store();
  // A parameter past its limit, packed by a client that does not check it, under the right digest.
  const loose = new DeclaredWrites<TodoOp>(changed(s.codec.declaration, 'add', 'title', { max_bytes: null }));
  const tooLong = loose.encodeRequest(freshKey(), [
    { write: 'add', params: { title: 'fine', due_ns: null } },
    { write: 'add', params: { title: 'x'.repeat(201), due_ns: 5n } },
  ]);
  tooLong.set(s.codec.declaration.digest, 1);
  assert.deepEqual(await sendOnce(s, tooLong, 2), {
    kind: 'refused',
    refusal: {
      name: 'InvalidParam',
      detail: 'op 1 (add, parameter title): 201 bytes; at most 200',
      refusal: { InvalidParam: { op: 1n, write: 'add', param: 'title', reason: '201 bytes; at most 200' } },
    },
  });
  assert.throws(() => s.codec.check({ write: 'add', params: { title: 'x'.repeat(201), due_ns: 5n } }), InvalidOpError);

  // Bytes that are not a request: a write index one past the declaration's last. The client's
  // reader refuses it alike.
  const count = s.codec.declaration.writes.length;
  const malformed = new Uint8Array([...s.codec.encodeRequest(freshKey(), []), count]);
  const what = `write index ${count}; the declaration has ${count} writes`;
  assert.deepEqual(await sendOnce(s, malformed, 1), {
    kind: 'refused',
    refusal: { name: 'Malformed', detail: `byte 33: ${what}`, refusal: { Malformed: { offset: 33n, what } } },
  });
  assert.throws(() => s.codec.decodeRequest(malformed), (e: unknown) => e instanceof PackedError && e.offset === 33 && e.what === what);

  // A caller who is neither a controller nor a writer: its ingress message is rejected before
  // it runs (the canister's inspect_message), a final answer.
  const stranger = batcher(s, s.codec, await newAgent(url));
  const strangers = [stranger.trySubmit({ write: 'add', params: { title: 'not mine', due_ns: null } })];
  stranger.flush();
  await stranger.close();
  const [strangerResult] = await Promise.allSettled(strangers);
  assert.equal(strangerResult!.status, 'rejected');
  const e = (strangerResult as PromiseRejectedResult).reason as unknown;
  assert.ok(e instanceof BatchError, String(e));
  assert.deepEqual([e.kind, e.code], ['rejected', RejectCode.CanisterReject], e.message);
  assert.equal(stranger.stats().attempts, 1, 'final: not retried');

  // An op the database refuses (the table's CHECK on an empty title) fails alone.
  const results = await run(batcher(s), [
    { write: 'add', params: { title: 'before', due_ns: null } },
    { write: 'add', params: { title: '', due_ns: null } },
    { write: 'add', params: { title: 'after', due_ns: -1n } },
  ]);
  assert.deepEqual(results.map((r) => ('Failed' in r ? r.Failed.code : 'Committed' in r ? r.Committed.rows_changed : r)), [1n, 275, 1n]);
  assert.match('Failed' in results[1]! ? results[1].Failed.message : '', /CHECK constraint failed/);
  assert.deepEqual((await s.todos()).map((t) => [t.title, t.due_ns]), [['before', []], ['after', [-1n]]]);
});

test("the README's example adds todos on the todo store", async () => {
  const s = await store();
  const b = await connect(s.agent, s.canisterId.toText());
  const ids = await Promise.all([addTodo(b, 'milk'), addTodo(b, 'bread', 1_700_000_000_000_000_000n)]);
  await assert.rejects(addTodo(b, ''), /not added: CHECK constraint failed/);
  await b.close();
  assert.deepEqual(
    (await s.todos()).map((t) => [t.id, t.title, t.due_ns]),
    [
      [ids[0], 'milk', []],
      [ids[1], 'bread', [1_700_000_000_000_000_000n]],
    ],
  );
});
