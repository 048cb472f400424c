// icp-cli (the `icp` binary of @icp-sdk/icp-cli-linux-x64) against `offline-pocket-ic
// --replica`: with the `connected` network (`root-key: fetch`) of the project's own icp.yaml,
// `icp deploy` builds the reference canister with the project's build steps and
// installs it, and `icp canister call` makes Candid update and query calls.
//
// The test runs icp in a temporary directory holding the project's icp.yaml (its `offline`
// network's URL replaced by this test's server), a scripts/build.sh that runs the repository's,
// and target/; icp-cli keeps its state (.icp) and identities (HOME) there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir, homedir } from 'node:os';
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
  // The project's own icp.yaml, its `offline` network pointed at this test's server.
  const own = readFileSync(join(repoRoot, 'icp.yaml'), 'utf8');
  const committedUrl = 'url: http://127.0.0.1:4943';
  assert.equal(own.split(committedUrl).length, 2, 'icp.yaml declares the offline network once');
  writeFileSync(join(project, 'icp.yaml'), own.replace(committedUrl, `url: ${replica.url}`));
  // Its build steps run scripts/build.sh (here: the repository's, run in the repository so
  // cargo reuses its build) and copy from target/.
  mkdirSync(join(project, 'scripts'));
  writeFileSync(join(project, 'scripts/build.sh'), `#!/usr/bin/env bash\nexec '${join(repoRoot, 'scripts/build.sh')}' "$@"\n`, { mode: 0o755 });
  symlinkSync(join(repoRoot, 'target'), join(project, 'target'));
  const home = join(project, '.home');
  mkdirSync(home);
  // icp-cli keeps its identities under HOME; the build's rustup and cargo keep theirs.
  env = {
    ...process.env,
    HOME: home,
    RUSTUP_HOME: process.env.RUSTUP_HOME ?? join(homedir(), '.rustup'),
    CARGO_HOME: process.env.CARGO_HOME ?? join(homedir(), '.cargo'),
  };
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
  const again = run(['canister', 'call', '-e', 'offline', 'bench_canister', 'create_user', '("bob", "bob@example.com")']);
  assert.match(again, /last_insert_rowid = 2/);
  // A query (node-signed, verified by icp-cli's agent).
  const counts = run(['canister', 'call', '-e', 'offline', '--query', 'bench_canister', 'counts', '()']);
  assert.match(counts, /users = 2 : nat64/);
  assert.match(counts, /orders = 0 : nat64/);
});
