// `Batcher.close()` leaves nothing running: a Node process (test/close_child.ts) that writes to
// the todo store on the offline replica through the batcher and the agent, with its first
// answer dropped (the replica holds that connection for 120 s) and the batch retried after the
// attempt timeout, exits within 2 s of `close()` resolving. Only the exit is timed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Actor, HttpAgent } from '@icp-sdk/core/agent';
import type { IDL } from '@icp-sdk/core/candid';
import { Ed25519KeyIdentity } from '@icp-sdk/core/identity';

import { type Replica, canisterWasm, deploy, hook, startReplica } from './replica.js';

const wasm = canisterWasm('todo_canister');
const child = fileURLToPath(new URL('./close_child.js', import.meta.url));
let replica: Replica | undefined;

before(async () => {
  replica = await startReplica({ 'the todo canister (scripts/build_example.sh)': wasm });
});
after(() => replica?.stop());

const todosIdl: IDL.InterfaceFactory = ({ IDL }) =>
  IDL.Service({
    todos: IDL.Func(
      [IDL.Int64],
      [IDL.Variant({ Ok: IDL.Vec(IDL.Record({ id: IDL.Int64, title: IDL.Text })), Err: IDL.Reserved })],
      ['query'],
    ),
  });

interface ChildReport {
  closedAt: number;
  ids: string[];
  stats: { batches: number; attempts: number; retries: number; duplicateReplies: number };
}

/** Runs the child; resolves to its report and the time it exited (killed after 150 s: it hung). */
function runChild(args: string[]): Promise<{ report: ChildReport; exitedAt: number }> {
  return new Promise((resolve, reject) => {
    const process_ = spawn(process.execPath, [child, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    const hung = setTimeout(() => process_.kill('SIGKILL'), 150_000);
    let out = '';
    let exitedAt = 0;
    process_.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    process_.on('exit', () => (exitedAt = Date.now()));
    process_.on('close', (code, signal) => {
      clearTimeout(hung);
      if (code !== 0) return reject(new Error(`the child ended with ${code ?? signal}: ${out}`));
      resolve({ report: JSON.parse(out) as ChildReport, exitedAt });
    });
  });
}

test('a Node process exits within 2 s of close() after a dropped reply and a retry', async () => {
  const identity = Ed25519KeyIdentity.generate();
  const agent = await HttpAgent.create({ host: replica!.url, identity, shouldFetchRootKey: true });
  const canisterId = await deploy(agent, wasm);
  await hook(replica!.url, 'drop_replies', { count: 1 });

  const { report, exitedAt } = await runChild([replica!.url, canisterId.toText(), JSON.stringify(identity.toJSON())]);
  const s = report.stats;
  assert.deepEqual(
    [s.batches, s.attempts, s.retries, s.duplicateReplies],
    [1, 2, 1, 1],
    'one batch; its first answer dropped, the retry answered from the canister record',
  );
  const lingered = exitedAt - report.closedAt;
  console.log(`close(): the process exited ${lingered} ms after close() resolved (first answer dropped, ${s.attempts} attempts)`);
  assert.ok(lingered < 2_000, `the process exited ${lingered} ms after close() resolved`);

  const todos = (await Actor.createActor(todosIdl, { agent, canisterId }).todos!(0n)) as { Ok: { id: bigint; title: string }[] };
  assert.deepEqual(
    todos.Ok.map((t) => [String(t.id), t.title]),
    report.ids.map((id, i) => [id, ['bread', 'eggs', 'milk'][i]]),
    'each todo applied once, with the id its op was told',
  );
});
