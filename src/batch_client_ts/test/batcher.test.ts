// The batcher against the simulated canister and network (test/sim.ts), on a virtual clock:
// each fault kind, the canister's refusals, resubmission, backpressure, and a randomized run
// of 10,000 ops in which every op's outcome reaches its submitter and nothing runs twice.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { BatchError, Batcher, type BatcherConfig, QueueFullError } from '../src/batcher.js';
import type { WriteRefusal } from '../src/codec.js';
import { PackedUserOrders } from './reference/codec.js';
import type { Outcome, UserOrderOp } from './reference/packed.js';
import { FAULTS, type Fault, FaultyNetwork, Random, SECOND_NS, SimCanister, VirtualScheduler } from './sim.js';

type Result = { ok: true; outcome: Outcome } | { ok: false; error: BatchError<WriteRefusal> };

const order = (tag: number, user = 1n): UserOrderOp => ({ CreateOrder: { user_id: user, amount: tag } });

function config(overrides: Partial<BatcherConfig> = {}): Partial<BatcherConfig> {
  return {
    maxBatchOps: 100,
    maxQueuedOps: 1_000,
    maxDelayMs: 50,
    maxInFlight: 4,
    initialBackoffMs: 100,
    maxBackoffMs: 2_000,
    retryForMs: 1_800_000,
    attemptTimeoutMs: 1_000,
    keyPrefix: new TextEncoder().encode('testkey!'),
    ...overrides,
  };
}

function settle(promise: Promise<Outcome>): Promise<Result> {
  return promise.then(
    (outcome) => ({ ok: true, outcome }),
    (error: unknown) => {
      assert.ok(error instanceof BatchError, String(error));
      return { ok: false, error: error as BatchError<WriteRefusal> };
    },
  );
}

interface Setup {
  scheduler: VirtualScheduler;
  canister: SimCanister;
  network: FaultyNetwork;
  batcher: Batcher<UserOrderOp, Outcome, WriteRefusal>;
}

function setup(script: Fault[] = [], overrides: Partial<BatcherConfig> = {}): Setup {
  const scheduler = new VirtualScheduler();
  const canister = new SimCanister();
  const network = new FaultyNetwork(canister, scheduler, script);
  const batcher = new Batcher(new PackedUserOrders(), network, config(overrides), scheduler);
  return { scheduler, canister, network, batcher };
}

/** Submits the ops and runs the clock until every outcome is in and the batcher is closed. */
async function runOps(s: Setup, ops: UserOrderOp[]): Promise<Result[]> {
  const results: (Result | undefined)[] = ops.map(() => undefined);
  ops.forEach((op, i) => {
    void settle(s.batcher.trySubmit(op)).then((r) => (results[i] = r));
  });
  let closed = false;
  await s.scheduler.run(() => results.every((r) => r !== undefined));
  void s.batcher.close().then(() => (closed = true));
  await s.scheduler.run(() => closed);
  return results as Result[];
}

/** Lets `ms` of virtual time pass (delayed deliveries land). */
async function idle(s: Setup, ms: number): Promise<void> {
  const until = s.scheduler.nowMs + ms;
  s.scheduler.setTimer(ms, () => {});
  await s.scheduler.run(() => s.scheduler.nowMs >= until);
}

/**
 * Like {@link runOps}, from `submitters` concurrent submitters, each enqueuing its share in
 * order and waiting for room when the queue is full.
 */
async function runOpsConcurrently(s: Setup, ops: UserOrderOp[], submitters: number): Promise<Result[]> {
  const results: (Result | undefined)[] = ops.map(() => undefined);
  for (let k = 0; k < submitters; k++) {
    void (async () => {
      for (let i = k; i < ops.length; i += submitters) {
        const { outcome } = await s.batcher.enqueue(ops[i]!);
        void settle(outcome).then((r) => (results[i] = r));
      }
    })();
  }
  let closed = false;
  await s.scheduler.run(() => results.every((r) => r !== undefined));
  void s.batcher.close().then(() => (closed = true));
  await s.scheduler.run(() => closed);
  return results as Result[];
}

const committedRow = (r: Result): bigint | undefined =>
  r.ok && 'Committed' in r.outcome && r.outcome.Committed.rows_changed === 1n ? r.outcome.Committed.last_insert_rowid : undefined;

test('each fault kind ends in one run of the batch and every outcome', async () => {
  for (const fault of ['none', ...FAULTS] as Fault[]) {
    const s = setup([fault]);
    const results = await runOps(s, [order(1), order(2), order(3)]);
    await idle(s, 10_000);
    results.forEach((r, i) => {
      assert.notEqual(committedRow(r), undefined, `${fault}: ${JSON.stringify(r, (_, v) => (typeof v === 'bigint' ? `${v}` : v))}`);
      assert.equal(s.canister.rows.get(i + 1), 1, `${fault}: op ${i + 1}`);
    });
    assert.equal(s.canister.executions, 1, fault);
    const stats = s.batcher.stats();
    assert.equal(stats.batches, 1, fault);
    assert.equal(stats.attempts, fault === 'none' || fault === 'sentTwice' ? 1 : 2, fault);
    assert.equal(stats.duplicateReplies, fault === 'replyLostAfterCommit' || fault === 'delayedReply' ? 1 : 0, fault);
    assert.equal(s.network.twinsDiffer, 0, fault);
  }
});

test('close() leaves nothing running: the delay timer is cleared, an abandoned attempt is aborted and waited for', async () => {
  for (const fault of ['none', 'timeout', 'delayedReply', 'delayedDelivery'] as Fault[]) {
    // A delay far longer than the run: its timer, armed by the first submit, must not outlive the batch.
    const s = setup([fault], { maxDelayMs: 600_000 });
    const ops = [order(1), order(2), order(3)].map((op) => settle(s.batcher.trySubmit(op)));
    s.batcher.flush();
    let closed = false;
    void s.batcher.close().then(() => (closed = true));
    await s.scheduler.run(() => closed);
    const results = await Promise.all(ops);
    results.forEach((r, i) => assert.equal(s.canister.orderIds.get(committedRow(r)!), i + 1, `${fault}: op ${i + 1}`));
    assert.equal(s.network.aborted, fault === 'none' ? 0 : 1, `${fault}: the abandoned attempt's call is aborted`);
    assert.equal(s.network.openCalls, 0, `${fault}: every call settled before close() resolved`);
    assert.equal(s.scheduler.pending(), fault === 'delayedDelivery' ? 1 : 0, `${fault}: no timer of the batcher left`);
    assert.ok(s.scheduler.nowMs < 10_000, `${fault}: closed at ${s.scheduler.nowMs} ms`);
  }

  // A transport that does not honour its signal: close() waits until its abandoned call settles.
  const scheduler = new VirtualScheduler();
  const canister = new SimCanister();
  const network = new FaultyNetwork(canister, scheduler);
  let first = true;
  const deaf = {
    call(request: Uint8Array): Promise<Uint8Array> {
      if (!first) return network.call(request, new AbortController().signal);
      first = false;
      return new Promise((resolve) => scheduler.setTimer(30_000, () => resolve(new Uint8Array())));
    },
  };
  const batcher = new Batcher(new PackedUserOrders(), deaf, config(), scheduler);
  const outcome = settle(batcher.trySubmit(order(9)));
  let closedAt: number | undefined;
  void batcher.close().then(() => (closedAt = scheduler.nowMs));
  await scheduler.run(() => closedAt !== undefined);
  assert.notEqual(committedRow(await outcome), undefined);
  assert.equal(closedAt, 30_000);
});

test('a stopped canister is retried until it runs again', async () => {
  const s = setup();
  s.canister.stopped = true;
  s.scheduler.setTimer(30_000, () => (s.canister.stopped = false));
  const [result] = await runOps(s, [order(7)]);
  assert.notEqual(committedRow(result!), undefined);
  assert.equal(s.canister.rows.get(7), 1);
  assert.ok(s.batcher.stats().retries >= 5);
});

test('a key past its window is unknown if it may have run, refused if it did not', async () => {
  const s = setup(['replyLostAfterCommit']);
  // After the first attempt ran (at 50 ms), before its retry (100 ms later).
  s.scheduler.setTimer(80, () => (s.canister.skewNs = s.canister.windowNs + s.canister.driftNs + SECOND_NS));
  const [lost] = await runOps(s, [order(5)]);
  assert.ok(!lost!.ok && lost!.error.kind === 'unknown' && lost!.error.message.includes('TooOld'), String(lost));
  assert.equal(s.canister.rows.get(5), 1);

  const t = setup();
  t.canister.skewNs = t.canister.windowNs + t.canister.driftNs + SECOND_NS;
  const [refused] = await runOps(t, [order(6)]);
  assert.ok(!refused!.ok && refused!.error.kind === 'refused' && refused!.error.refusal?.name === 'TooOld');
  assert.equal(t.canister.rows.get(6), undefined);
});

test('a client clock ahead of the canister and an unauthorized caller are refused per op', async () => {
  const s = setup();
  s.canister.skewNs = -(s.canister.driftNs + SECOND_NS);
  for (const r of await runOps(s, [order(1), order(2)])) {
    assert.ok(!r.ok && r.error.kind === 'refused' && r.error.refusal?.name === 'CreatedInFuture');
  }
  const t = setup();
  t.canister.authorized = false;
  for (const r of await runOps(t, [order(1), order(2)])) {
    assert.ok(!r.ok && r.error.kind === 'refused' && r.error.refusal?.name === 'NotAuthorized');
  }
  assert.equal(s.canister.rows.size + t.canister.rows.size, 0);
});

test('a refusal after an unanswered attempt is unknown, never a false "did not run"', async () => {
  const s = setup(['replyLostAfterCommit']);
  s.scheduler.setTimer(80, () => (s.canister.authorized = false));
  const [result] = await runOps(s, [order(1)]);
  assert.ok(!result!.ok && result!.error.kind === 'unknown', String(result));
  assert.equal(s.canister.rows.get(1), 1);
});

test('ops not executed are resubmitted under new keys; failures are per op', async () => {
  const s = setup([], { maxBatchOps: 10 });
  s.canister.budget = 3;
  const ops = Array.from({ length: 20 }, (_, i) => (i % 5 === 4 ? order(i + 1, 999n) : order(i + 1)));
  const results = await runOps(s, ops);
  results.forEach((r, i) => {
    if (i % 5 === 4) {
      assert.ok(r.ok && 'Failed' in r.outcome && r.outcome.Failed.code === 787);
      assert.equal(s.canister.rows.get(i + 1), undefined);
    } else {
      assert.equal(s.canister.orderIds.get(committedRow(r)!), i + 1);
      assert.equal(s.canister.rows.get(i + 1), 1);
    }
  });
  const stats = s.batcher.stats();
  assert.ok(stats.resubmitted >= 10, JSON.stringify(stats));
  assert.ok(stats.batches >= 7, JSON.stringify(stats));
});

test('a full queue pushes back: enqueue waits for room, trySubmit throws', async () => {
  const s = setup(['timeout'], { maxBatchOps: 2, maxQueuedOps: 2, maxInFlight: 1 });
  const first = [settle(s.batcher.trySubmit(order(1))), settle(s.batcher.trySubmit(order(2)))];
  // The first batch left the queue at once (size trigger): room for two more.
  const more = [settle(s.batcher.trySubmit(order(3))), settle(s.batcher.trySubmit(order(4)))];
  assert.throws(() => s.batcher.trySubmit(order(5)), QueueFullError);
  let queued = false;
  const waiting = s.batcher.enqueue(order(5)).then(({ outcome }) => {
    queued = true;
    return settle(outcome);
  });
  await s.scheduler.run(() => true);
  assert.equal(queued, false);
  const all = await (async () => {
    let results: Result[] | undefined;
    void Promise.all([...first, ...more, waiting]).then((r) => (results = r));
    await s.scheduler.run(() => results !== undefined);
    return results!;
  })();
  assert.equal(queued, true);
  all.forEach((r, i) => assert.equal(s.canister.orderIds.get(committedRow(r)!), i + 1));
});

test('10,000 ops with random faults: every outcome to its submitter, none lost, none applied twice', async () => {
  const s = setup([], { maxBatchOps: 25, maxResubmits: 1_000 });
  s.canister.budget = 20;
  s.network.random = { rng: new Random(0x9e3779b97f4a7c15n), percent: 35 };
  const total = 10_000;
  const ops = Array.from({ length: total }, (_, i) => (i % 97 === 96 ? order(i + 1, 999n) : order(i + 1)));
  const results = await runOpsConcurrently(s, ops, 50);
  await idle(s, 60_000);
  assert.equal(results.length, total);
  let committed = 0;
  results.forEach((r, i) => {
    const tag = i + 1;
    if (i % 97 === 96) {
      assert.ok(r.ok && 'Failed' in r.outcome && r.outcome.Failed.code === 787, `op ${tag}`);
      assert.equal(s.canister.rows.get(tag), undefined, `op ${tag}`);
    } else {
      const rowid = committedRow(r);
      assert.notEqual(rowid, undefined, `op ${tag}`);
      assert.equal(s.canister.orderIds.get(rowid!), tag, `op ${tag} got another op's outcome`);
      assert.equal(s.canister.rows.get(tag), 1, `op ${tag}`);
      committed += 1;
    }
  });
  assert.ok([...s.canister.rows.values()].every((n) => n === 1), 'an op applied twice');
  assert.equal(s.canister.rows.size, committed);
  assert.equal(s.network.twinsDiffer, 0);
  const stats = s.batcher.stats();
  assert.equal(stats.unknown + stats.refused, 0);
  for (const fault of FAULTS) assert.ok((s.network.injected.get(fault) ?? 0) >= 10, `${fault}: ${s.network.injected.get(fault)}`);
  assert.ok(stats.duplicateReplies >= 10 && stats.resubmitted >= 100, JSON.stringify(stats));
  console.log(
    `randomized run: ${total} ops, ${committed} committed, ${total - committed} failed, 0 lost, 0 applied twice; ` +
      `${stats.batches} batches, ${stats.attempts} attempts, ${stats.retries} retries, ${stats.duplicateReplies} duplicate replies, ` +
      `${stats.resubmitted} resubmitted; faults ${JSON.stringify(Object.fromEntries(s.network.injected))}`,
  );
});

test('an ordering key holds its later ops until its batch in flight is settled; others pass', async () => {
  const s = setup(['timeout'], { maxBatchOps: 3, maxDelayMs: 600_000 });
  const key = { orderingKey: 'user 1' };
  const first = [settle(s.batcher.trySubmit(order(1), key)), settle(s.batcher.trySubmit(order(2), key)), settle(s.batcher.trySubmit(order(100)))];
  // The first batch left (size trigger) and its attempt hangs; the key's next op waits, the others leave.
  const later = [settle(s.batcher.trySubmit(order(3), key)), settle(s.batcher.trySubmit(order(20), { orderingKey: 'user 2' })), settle(s.batcher.trySubmit(order(101)))];
  s.batcher.flush();
  assert.deepEqual([s.batcher.stats().batches, s.batcher.stats().queued], [2, 1]);
  const all = await (async () => {
    let results: Result[] | undefined;
    void Promise.all([...first, ...later]).then((r) => (results = r));
    await s.scheduler.run(() => results !== undefined);
    return results!;
  })();
  const rowOf = (i: number) => committedRow(all[i]!)!;
  // Op 3 committed after the retry of ops 1 and 2, the ops of the batch sent past it before.
  assert.deepEqual([s.canister.orderIds.get(rowOf(4)), s.canister.orderIds.get(rowOf(5))], [20, 101]);
  assert.ok(rowOf(0) < rowOf(1) && rowOf(1) < rowOf(3), `rows ${all.map((_, i) => rowOf(i))}`);
  assert.ok(rowOf(4) < rowOf(0), 'the other key and the unkeyed op did not wait');
  assert.equal(s.batcher.stats().batches, 3);
});

/** Per key, the row ids of its ops in submission order, from a run of `KEYS` submitters. */
async function orderingRun(ordered: boolean): Promise<{ rowids: bigint[][]; stats: ReturnType<Setup['batcher']['stats']>; injected: Map<Fault, number> }> {
  const keys = 20;
  const perKey = 100;
  const s = setup([], { maxBatchOps: 10, maxResubmits: 1_000 });
  s.canister.budget = 8;
  s.network.random = { rng: new Random(0x0123456789abcdefn), percent: 35 };
  const results: (Result | undefined)[][] = Array.from({ length: keys }, () => Array<Result | undefined>(perKey).fill(undefined));
  for (let k = 0; k < keys; k++) {
    void (async () => {
      for (let i = 0; i < perKey; i++) {
        const tag = 1 + k * perKey + i;
        const { outcome } = await s.batcher.enqueue(order(tag), ordered ? { orderingKey: `user ${k}` } : {});
        void settle(outcome).then((r) => (results[k]![i] = r));
        if (i % 10 === 0) await new Promise<void>((resolve) => s.scheduler.setTimer((k % 7) * 5, resolve));
      }
    })();
  }
  await s.scheduler.run(() => results.every((rs) => rs.every((r) => r !== undefined)));
  let closed = false;
  void s.batcher.close().then(() => (closed = true));
  await s.scheduler.run(() => closed);
  await idle(s, 60_000);
  assert.equal(s.network.twinsDiffer, 0);
  assert.equal(s.canister.rows.size, keys * perKey, 'lost ops');
  assert.ok([...s.canister.rows.values()].every((n) => n === 1), 'an op applied twice');
  const rowids = results.map((rs, k) =>
    rs.map((r, i) => {
      const tag = 1 + k * perKey + i;
      const rowid = committedRow(r!);
      assert.notEqual(rowid, undefined, `op ${tag}`);
      assert.equal(s.canister.orderIds.get(rowid!), tag, `op ${tag} got another op's outcome`);
      return rowid!;
    }),
  );
  return { rowids, stats: s.batcher.stats(), injected: s.network.injected };
}

const inversions = (rowids: bigint[][]): number =>
  rowids.reduce((n, ids) => n + ids.slice(1).filter((id, i) => ids[i]! > id).length, 0);

test('ops sharing an ordering key commit in submission order under random faults; nothing lost, nothing applied twice', async () => {
  const ordered = await orderingRun(true);
  const unordered = await orderingRun(false);
  for (const [k, ids] of ordered.rowids.entries()) {
    assert.deepEqual(ids, [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), `key ${k}: commit order differs from submission order`);
  }
  assert.ok(inversions(unordered.rowids) > 0, 'without keys the faults reorder nothing: the check proves nothing');
  const st = ordered.stats;
  console.log(
    `ordering run: 2000 ops of 20 keys, ${st.batches} batches, ${st.attempts} attempts, ${st.retries} retries, ` +
      `${st.duplicateReplies} duplicate replies, ${st.resubmitted} resubmitted; faults ${JSON.stringify(Object.fromEntries(ordered.injected))}; ` +
      `per-key order checked on 2000 ops: ${inversions(ordered.rowids)} out of order (without keys: ${inversions(unordered.rowids)})`,
  );
  assert.equal(st.unknown + st.refused, 0);
  assert.equal(st.outcomes, 2_000);
  for (const fault of FAULTS) assert.ok((ordered.injected.get(fault) ?? 0) >= 5, `${fault}: ${ordered.injected.get(fault)}`);
  assert.ok(st.duplicateReplies >= 5 && st.resubmitted >= 50, JSON.stringify(st));
});
