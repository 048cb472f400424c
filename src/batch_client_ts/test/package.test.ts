// The published package as a user gets it: `npm pack` (its prepack build) on a copy of the
// package's sources, the tarball installed into a scratch project (from the npm cache the
// lockfile filled, the registry only for what it lacks), then imported by name: type-checked
// by a `.ts` file under NodeNext resolution (its `exports` types), and run by a `.mjs` file
// that packs the shared vectors' batch to its exact bytes and writes to the todo store on the
// offline replica through the Batcher.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Actor, HttpAgent } from '@icp-sdk/core/agent';
import { IDL } from '@icp-sdk/core/candid';
import { Ed25519KeyIdentity } from '@icp-sdk/core/identity';

import { vectors, vectorsPath } from './declared_vectors.js';
import { type Replica, canisterWasm, deploy, startReplica } from './replica.js';

const run = promisify(execFile);
const packageDir = fileURLToPath(new URL('../../', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const wasm = canisterWasm('todo_canister');

let scratch = '';
let replica: Replica | undefined;
let tarball = '';
let packed: string[] = [];
let app = '';

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'batch-client-package-'));
  // A copy of the package's sources, so that its prepack build does not rewrite the dist/
  // the other test files run from; its node_modules are the package's.
  const copy = join(scratch, 'package');
  mkdirSync(copy);
  for (const entry of ['package.json', 'package-lock.json', 'README.md', 'tsconfig.json', 'tsconfig.build.json', 'src']) {
    cpSync(join(packageDir, entry), join(copy, entry), { recursive: true });
  }
  symlinkSync(join(packageDir, 'node_modules'), join(copy, 'node_modules'), 'dir');
  const { stdout } = await run(npm, ['pack', '--json', '--pack-destination', scratch], { cwd: copy });
  const [info] = JSON.parse(stdout) as [{ filename: string; files: { path: string }[] }];
  tarball = join(scratch, info.filename);
  packed = info.files.map((f) => f.path).sort();

  app = join(scratch, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }));
  await run(npm, ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund'], { cwd: app });
  replica = await startReplica({ 'the todo canister (scripts/build_example.sh)': wasm });
});

after(() => {
  replica?.stop();
  if (scratch !== '') rmSync(scratch, { recursive: true, force: true });
});

test('the tarball holds the compiled modules, their types, the README and package.json: no sources, tests or maps', () => {
  const modules = readdirSync(join(packageDir, 'src'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.slice(0, -3));
  assert.ok(modules.includes('declared') && modules.includes('batcher'));
  const expected = ['README.md', 'package.json', ...modules.flatMap((m) => [`dist/src/${m}.d.ts`, `dist/src/${m}.js`])].sort();
  assert.deepEqual(packed, expected);
  const manifest = JSON.parse(readFileSync(join(app, 'node_modules/ic-batch-client/package.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(manifest.private, undefined);
  assert.deepEqual(manifest.dependencies, JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')).dependencies);
});

test("a TypeScript user's code type-checks against the package's exported types, which hold no workload of the reference canister", async () => {
  writeFileSync(
    join(app, 'check.ts'),
    `import { Batcher, DeclaredWrites, InvalidOpError, type DeclaredOp, type DeclaredRefusal, type Outcome } from 'ic-batch-client';
// @ts-expect-error the reference canister's users/orders codec is not the package's
import { PackedUserOrders } from 'ic-batch-client';
// @ts-expect-error nor its ops
import type { UserOrderOp } from 'ic-batch-client';
type TodoOp = { write: 'add'; params: { title: string; due_ns: bigint | null } };
declare const writes: DeclaredWrites<TodoOp>;
declare const batcher: Batcher<TodoOp, Outcome, DeclaredRefusal>;
const op: TodoOp = { write: 'add', params: { title: 'milk', due_ns: null } };
const generic: DeclaredOp = op;
writes.check(op);
export const outcome: Promise<Outcome> = batcher.submit(op);
export const ordered: Promise<Outcome> = batcher.submit(op, { orderingKey: 'list 1' });
export const absent: unknown[] = [PackedUserOrders, null as unknown as UserOrderOp];
export const isInvalid = (e: unknown): boolean => e instanceof InvalidOpError && e.param === generic.write;
// @ts-expect-error an integer parameter is a bigint
export const wrong: TodoOp = { write: 'add', params: { title: 'milk', due_ns: 5 } };
`,
  );
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2022', 'DOM'], strict: true, noEmit: true, skipLibCheck: true, types: [] },
      files: ['check.ts'],
    }),
  );
  const tsc = join(packageDir, 'node_modules/typescript/bin/tsc');
  await run(process.execPath, [tsc, '-p', app], { cwd: app });
});

test('imported by name, the package packs the shared vectors and writes to the todo store through the Batcher', async () => {
  const agentDir = join(app, 'node_modules/@icp-sdk/core');
  assert.ok(readdirSync(agentDir).length > 0, '@icp-sdk/core is installed with the package');
  const identity = Ed25519KeyIdentity.generate();
  const agent = await HttpAgent.create({ host: replica!.url, identity, shouldFetchRootKey: true });
  const canisterId = await deploy(agent, wasm);

  writeFileSync(
    join(app, 'main.mjs'),
    `import { readFileSync } from 'node:fs';
import { HttpAgent } from '@icp-sdk/core/agent';
import { Ed25519KeyIdentity } from '@icp-sdk/core/identity';
import * as pkg from 'ic-batch-client';
import { AgentTransport, Batcher, DeclaredWrites } from 'ic-batch-client';

const [vectorsFile, host, canisterId, identityJson] = process.argv.slice(2);
const vectors = JSON.parse(readFileSync(vectorsFile, 'utf8'));
const unhex = (text) => new Uint8Array(Buffer.from(text, 'hex'));
const hex = (bytes) => Buffer.from(bytes).toString('hex');

// The shared vectors' declaration and its last batch, values typed by their declared kinds.
const offline = new DeclaredWrites({ ...vectors.declaration, digest: unhex(vectors.declaration.digest) });
const vector = vectors.requests.at(-1);
const kinds = new Map(vectors.declaration.writes.map((w) => [w.name, new Map(w.params.map((p) => [p.name, p.kind]))]));
const typed = (kind, v) => (v === null ? null : kind === 'Integer' ? BigInt(v) : kind === 'Blob' ? unhex(v) : v);
const ops = vector.ops.map((op) => ({
  write: op.write,
  params: Object.fromEntries(Object.entries(op.params).map(([name, v]) => [name, typed(kinds.get(op.write).get(name), v)])),
}));
const key = { createdAtTimeNs: BigInt(vector.key.created_at_time_ns), id: unhex(vector.key.id) };
const packed = { expected: vector.bytes, actual: hex(offline.encodeRequest(key, ops)) };

// The todo store, its declaration fetched.
const agent = await HttpAgent.create({ host, identity: Ed25519KeyIdentity.fromJSON(identityJson), shouldFetchRootKey: true });
const writes = await DeclaredWrites.fetch(agent, canisterId);
const batcher = new Batcher(writes, new AgentTransport(agent, canisterId, 'execute_writes_packed'));
const added = ['bread', 'eggs'].map((title, i) => batcher.submit({ write: 'add', params: { title, due_ns: i === 0 ? null : 7n } }));
let invalid = '';
try {
  batcher.trySubmit({ write: 'add', params: { title: 'x'.repeat(201), due_ns: null } });
} catch (error) {
  invalid = error.constructor.name + ': ' + error.message;
}
await batcher.close();
const outcomes = (await Promise.all(added)).map((o) => ('Committed' in o ? String(o.Committed.last_insert_rowid) : 'Failed' in o ? o.Failed.message : 'not executed'));
const reference = ['PackedUserOrders', 'PACKED_RESULT', 'encodeKeyedOps', 'decodeKeyedOutcomes'].filter((name) => name in pkg);
console.log(JSON.stringify({ packed, digest: writes.digestHex, outcomes, invalid, reference }));
`,
  );
  const { stdout } = await run(process.execPath, ['main.mjs', fileURLToPath(vectorsPath), replica!.url, canisterId.toText(), JSON.stringify(identity.toJSON())], {
    cwd: app,
  });
  const result = JSON.parse(stdout) as { packed: { expected: string; actual: string }; digest: string; outcomes: string[]; invalid: string; reference: string[] };
  assert.deepEqual(result.reference, [], "the package exports none of the reference canister's codec");
  assert.equal(result.packed.expected, vectors.requests.at(-1)!.bytes);
  assert.equal(result.packed.actual, result.packed.expected, "the installed package packs the vectors' exact bytes");
  assert.equal(result.invalid, 'InvalidOpError: op add, parameter title: 201 bytes; at most 200');

  const todosIdl: IDL.InterfaceFactory = ({ IDL }) =>
    IDL.Service({
      todos: IDL.Func(
        [IDL.Int64],
        [IDL.Variant({ Ok: IDL.Vec(IDL.Record({ id: IDL.Int64, title: IDL.Text, due_ns: IDL.Opt(IDL.Int64), done: IDL.Bool })), Err: IDL.Reserved })],
        ['query'],
      ),
    });
  const todos = (await Actor.createActor(todosIdl, { agent, canisterId }).todos!(0n)) as { Ok: { id: bigint; title: string; due_ns: [] | [bigint] }[] };
  assert.deepEqual(
    todos.Ok.map((t) => [String(t.id), t.title, t.due_ns]),
    [
      [result.outcomes[0], 'bread', []],
      [result.outcomes[1], 'eggs', [7n]],
    ],
  );
  const declaration = (await Actor.createActor(
    ({ IDL }) => IDL.Service({ batch_declaration: IDL.Func([], [IDL.Record({ digest: IDL.Vec(IDL.Nat8) })], ['query']) }),
    { agent, canisterId },
  ).batch_declaration!()) as { digest: Uint8Array };
  assert.equal(result.digest, Buffer.from(declaration.digest).toString('hex'));
});
