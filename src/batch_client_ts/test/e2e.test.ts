// The TypeScript batcher on @icp-sdk/core (certificate verification on) against the offline
// replica (`offline-pocket-ic --replica --test-hooks`, built by `cargo build --release -p
// pocket_ic_server`) and the reference canister (`scripts/build.sh`): the reply lost after the
// commit, an answer later than the client waits, two concurrent sends of one key, a key past
// the canister's window, the canister stopped. Each checks that every op was applied once (the
// `users` table) and that each op's promise settled once, with its own row.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Actor, type HttpAgent } from '@icp-sdk/core/agent';
import type { IDL } from '@icp-sdk/core/candid';
import type { Principal } from '@icp-sdk/core/principal';

import {
  AgentTransport,
  BatchError,
  Batcher,
  type Outcome,
  type Scheduler,
  type WriteRefusal,
  realScheduler,
} from '../src/index.js';
import { PackedUserOrders } from './reference/codec.js';
import type { UserOrderOp } from './reference/packed.js';
import { type Replica, canisterWasm, deploy, hook as replicaHook, newAgent, startReplica } from './replica.js';

const wasm = canisterWasm('bench_canister');
let replica: Replica | undefined;
let url = '';

before(async () => {
  replica = await startReplica({ 'the canister (scripts/build.sh)': wasm });
  url = replica.url;
});
after(() => replica?.stop());

const hook = (name: string, body: object) => replicaHook(url, name, body);

const countsIdl: IDL.InterfaceFactory = ({ IDL }) =>
  IDL.Service({
    counts: IDL.Func([], [IDL.Variant({ Ok: IDL.Record({ users: IDL.Nat64, orders: IDL.Nat64 }), Err: IDL.Text })], ['query']),
  });

interface Setup {
  agent: HttpAgent;
  canisterId: Principal;
  users: () => Promise<bigint>;
}

/** A fresh canister, deployed by the identity that then writes through the batcher. */
async function setup(): Promise<Setup> {
  const agent = await newAgent(url);
  const canisterId = await deploy(agent, wasm);
  const counts = Actor.createActor(countsIdl, { agent, canisterId });
  const users = async () => ((await counts.counts!()) as { Ok: { users: bigint } }).Ok.users;
  return { agent, canisterId, users };
}

type OrderBatcher = Batcher<UserOrderOp, Outcome, WriteRefusal>;

function user(tag: string, i: number): UserOrderOp {
  return { CreateUser: { username: `${tag}${i}`, email: `${tag}${i}@e2e.example` } };
}

/** Submits `n` users as one batch, closes the batcher and settles every op's promise. */
async function oneBatch(batcher: OrderBatcher, tag: string, n: number): Promise<PromiseSettledResult<Outcome>[]> {
  const outcomes = Array.from({ length: n }, (_, i) => batcher.trySubmit(user(tag, i)));
  batcher.flush();
  await batcher.close();
  return Promise.allSettled(outcomes);
}

/** User `i` got row `i + 1`: one batch, in order, on a fresh canister. */
function assertAppliedInOrder(results: PromiseSettledResult<Outcome>[]): void {
  results.forEach((r, i) => {
    assert.deepEqual(r, { status: 'fulfilled', value: { Committed: { rows_changed: 1n, last_insert_rowid: BigInt(i + 1) } } }, `op ${i}`);
  });
}


const config = { maxDelayMs: 60_000, attemptTimeoutMs: 2_000, initialBackoffMs: 50, maxBackoffMs: 500 };

test('a reply lost after the commit is answered from the record on retry', async () => {
  const s = await setup();
  await hook('drop_replies', { count: 1 });
  const batcher: OrderBatcher = new Batcher(new PackedUserOrders(), new AgentTransport(s.agent, s.canisterId), config);
  assertAppliedInOrder(await oneBatch(batcher, 'lost', 5));
  assert.equal(await s.users(), 5n);
  const st = batcher.stats();
  assert.deepEqual([st.batches, st.attempts, st.retries, st.duplicateReplies, st.outcomes], [1, 2, 1, 1, 5]);
});

test('an answer later than the client waits is not applied again', async () => {
  const s = await setup();
  await hook('delay_replies', { count: 1, ms: 4_000 });
  const batcher: OrderBatcher = new Batcher(new PackedUserOrders(), new AgentTransport(s.agent, s.canisterId), config);
  assertAppliedInOrder(await oneBatch(batcher, 'late', 7));
  assert.equal(await s.users(), 7n);
  const st = batcher.stats();
  assert.deepEqual([st.attempts, st.retries, st.duplicateReplies], [2, 1, 1]);
});

test('two concurrent sends of one key run it once and answer both alike', async () => {
  const s = await setup();
  // Both transports get the same request bytes: the batcher's, captured and sent twice at once.
  const twin = new AgentTransport(s.agent, s.canisterId);
  const replies: Uint8Array[] = [];
  const racing = {
    async call(request: Uint8Array): Promise<Uint8Array> {
      const both = await Promise.all([twin.call(request), twin.call(request)]);
      replies.push(...both);
      return both[0]!;
    },
  };
  const batcher: OrderBatcher = new Batcher(new PackedUserOrders(), racing, config);
  assertAppliedInOrder(await oneBatch(batcher, 'twin', 4));
  assert.equal(await s.users(), 4n);
  const codec = new PackedUserOrders();
  const decoded = replies.map((r) => codec.decode(r, 4));
  assert.equal(decoded.length, 2);
  const executed = decoded.map((d) => {
    assert.equal(d.kind, 'executed');
    return d.kind === 'executed' ? d : undefined;
  });
  assert.deepEqual(executed[0]!.outcomes, executed[1]!.outcomes, 'both sends get the first run\'s outcomes');
  assert.equal(executed.filter((d) => d!.duplicate).length, 1, 'exactly one send ran the batch');
});

test('a key past the window runs nothing and says why', async () => {
  const s = await setup();
  const dayAndMore = BigInt(24 * 3600 + 60 + 60) * 1_000_000_000n;
  const behind: Scheduler = { ...realScheduler, nowNs: () => realScheduler.nowNs() - dayAndMore };
  const batcher: OrderBatcher = new Batcher(new PackedUserOrders(), new AgentTransport(s.agent, s.canisterId), config, behind);
  const results = await oneBatch(batcher, 'old', 3);
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    const e = (r as PromiseRejectedResult).reason;
    assert.ok(e instanceof BatchError, String(e));
    assert.equal(e.kind, 'refused');
    assert.match(String(e.message), /TooOld/);
  }
  assert.equal(await s.users(), 0n);
});

test('a stopped canister is retried until it runs again and applies once', async () => {
  const s = await setup();
  await hook('stop_canister', { canister_id: s.canisterId.toText() });
  const restart = new Promise<void>((done) =>
    setTimeout(() => void hook('start_canister', { canister_id: s.canisterId.toText() }).then(done), 1_500),
  );
  const batcher: OrderBatcher = new Batcher(new PackedUserOrders(), new AgentTransport(s.agent, s.canisterId), config);
  const results = await oneBatch(batcher, 'stop', 5);
  await restart;
  assertAppliedInOrder(results);
  assert.equal(await s.users(), 5n);
  const st = batcher.stats();
  assert.ok(st.retries >= 1, 'the stopped canister refused the first attempt');
  assert.equal(st.duplicateReplies, 0, 'refused attempts ran nothing');
});
