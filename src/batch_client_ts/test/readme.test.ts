// The README's example is this package's test/readme_example.ts, verbatim, type-checked by
// `tsc`, and run here against the simulated canister.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { Batcher } from '../src/batcher.js';
import { PackedUserOrders } from '../src/codec.js';
import { placeOrder } from './readme_example.js';
import { FaultyNetwork, SimCanister, VirtualScheduler } from './sim.js';

test('the README shows test/readme_example.ts verbatim', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const example = readFileSync(new URL('../../test/readme_example.ts', import.meta.url), 'utf8')
    .replace("from '../src/index.js'", "from 'ic-batch-client'");
  assert.ok(readme.includes(example), 'README.md must contain test/readme_example.ts (with the package import)');
});

test('the example places orders through a batcher, with a lost reply on the way', async () => {
  const scheduler = new VirtualScheduler();
  const canister = new SimCanister();
  const network = new FaultyNetwork(canister, scheduler, ['replyLostAfterCommit']);
  const batcher = new Batcher(new PackedUserOrders(), network, { attemptTimeoutMs: 1_000 }, scheduler);
  const ids: (bigint | Error)[] = [];
  void placeOrder(batcher, 1n, 10).then((id) => ids.push(id));
  void placeOrder(batcher, 1n, 20).then((id) => ids.push(id));
  void placeOrder(batcher, 2n, 30).catch((error: Error) => ids.push(error));
  await scheduler.run(() => ids.length === 3);
  assert.deepEqual(ids.slice(0, 2), [1n, 2n]);
  assert.match(String(ids[2]), /the order failed: FOREIGN KEY constraint failed/);
  assert.equal(canister.executions, 1);
  assert.equal(batcher.stats().duplicateReplies, 1);
});
