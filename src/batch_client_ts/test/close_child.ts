// The child process of close.test.ts: a Node service as a user writes it. It writes three todos
// to the todo store through a Batcher over the agent, closes the batcher, prints what happened
// and the time `close()` resolved, and returns from its module: from then on, only what the
// batcher or the agent left running can keep the process alive.
import { HttpAgent } from '@icp-sdk/core/agent';
import { Ed25519KeyIdentity } from '@icp-sdk/core/identity';
import { Principal } from '@icp-sdk/core/principal';

import { AgentTransport, Batcher, DeclaredWrites } from '../src/index.js';

const [host, canisterId, identityJson] = process.argv.slice(2) as [string, string, string];
const agent = await HttpAgent.create({ host, identity: Ed25519KeyIdentity.fromJSON(identityJson), shouldFetchRootKey: true });
const writes = await DeclaredWrites.fetch(agent, canisterId);
const batcher = new Batcher(writes, new AgentTransport(agent, Principal.fromText(canisterId), 'execute_writes_packed'), {
  attemptTimeoutMs: 1_000,
  initialBackoffMs: 50,
});
const outcomes = ['bread', 'eggs', 'milk'].map((title) => batcher.submit({ write: 'add', params: { title, due_ns: null } }));
await batcher.close();
const closedAt = Date.now();
const ids = (await Promise.all(outcomes)).map((o) => ('Committed' in o ? String(o.Committed.last_insert_rowid) : JSON.stringify(o)));
console.log(JSON.stringify({ closedAt, ids, stats: batcher.stats() }));
