// icp-cli (the `icp` binary of @icp-sdk/icp-cli-linux-x64) against `offline-pocket-ic
// --replica`: with a `connected` network (`root-key: fetch`) added to the project's own
// icp.yaml, `icp deploy` builds the reference canister with the project's build steps and
// installs it, and `icp canister call` makes Candid update and query calls.
//
// The project is "copied" into a temporary directory as symbolic links to every top-level
// entry of the repository except icp.yaml, which is the project's icp.yaml plus the network
// and an environment using it; icp-cli keeps its state (.icp) and identities (HOME) there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { startReplica, repoRoot } from './replica.mjs';

const require = createRequire(import.meta.url);
/** The icp binary shipped in the npm package (pinned in package-lock.json). */
const icp = join(dirname(require.resolve('@icp-sdk/icp-cli-linux-x64/package.json')), 'bin/icp');

/** @type {{ url: string, stop: () => void }} */
let replica;
/** @type {string} */
let project;
/** @type {NodeJS.ProcessEnv} */
let env;

before(async () => {
  replica = await startReplica();
  project = mkdtempSync(join(tmpdir(), 'icp-project-'));
  for (const entry of readdirSync(repoRoot)) {
    if (entry !== 'icp.yaml' && entry !== '.icp') symlinkSync(join(repoRoot, entry), join(project, entry));
  }
  const own = readFileSync(join(repoRoot, 'icp.yaml'), 'utf8');
  writeFileSync(
    join(project, 'icp.yaml'),
    `${own}
networks:
  - name: offline
    mode: connected
    url: ${replica.url}
    root-key: fetch
environments:
  - name: offline
    network: offline
    canisters: [bench_canister]
`,
  );
  const home = join(project, '.home');
  mkdirSync(home);
  env = { ...process.env, HOME: home };
  run(['identity', 'new', 'tester', '--storage', 'plaintext']);
  run(['identity', 'default', 'tester']);
});
after(() => replica?.stop());

/**
 * Runs icp in the project; returns its standard output.
 * @param {string[]} args
 */
function run(args) {
  return execFileSync(icp, args, { cwd: project, env, encoding: 'utf8', timeout: 600_000, stdio: ['ignore', 'pipe', 'pipe'] });
}

test('icp deploy builds and installs the canister; icp canister call calls it', () => {
  run(['deploy', '-e', 'offline', '-y']);
  const created = run(['canister', 'call', '-e', 'offline', 'bench_canister', 'create_user', '("alice", "alice@example.com")']);
  assert.match(created, /Committed/);
  assert.match(created, /last_insert_rowid = 1/);
  const again = run(['canister', 'call', '-e', 'offline', 'bench_canister', 'create_user', '("alice", "alice@example.com")']);
  assert.match(again, /UNIQUE constraint failed/);
  const counts = run(['canister', 'call', '-e', 'offline', 'bench_canister', 'counts', '()']);
  assert.match(counts, /users = 1/);
});
