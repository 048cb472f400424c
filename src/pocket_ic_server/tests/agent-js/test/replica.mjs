// Starts `offline-pocket-ic --replica` for a test file and stops it afterwards.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root (this package lives in src/pocket_ic_server/tests/agent-js). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../..');

/** The server binary: $OFFLINE_POCKET_IC_BIN, else the release build. */
export const serverBinary =
  process.env.OFFLINE_POCKET_IC_BIN ?? join(repoRoot, 'target/release/offline-pocket-ic');

/** The reference canister's wasm, built by scripts/build.sh. */
export const canisterWasm = join(repoRoot, 'target/canister/bench_canister.wasm');

/**
 * Starts a replica server with the test hooks on.
 * @returns {Promise<{ url: string, stop: () => void }>}
 */
export async function startReplica() {
  const dir = mkdtempSync(join(tmpdir(), 'offline-replica-'));
  const portFile = join(dir, 'port');
  const child = spawn(
    serverBinary,
    ['--replica', '--test-hooks', '--mute-canister-output', '--ttl', '600', '--port-file', portFile],
    { stdio: 'ignore' },
  );
  const started = Date.now();
  for (;;) {
    if (existsSync(portFile)) {
      const text = readFileSync(portFile, 'utf8');
      if (text.endsWith('\n')) {
        return { url: `http://127.0.0.1:${text.trim()}`, stop: () => child.kill() };
      }
    }
    if (Date.now() - started > 60_000) {
      child.kill();
      throw new Error('the server wrote no port file');
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Calls one of the server's fault-injection hooks.
 * @param {string} url
 * @param {string} name
 * @param {object} body
 */
export async function hook(url, name, body) {
  const r = await fetch(`${url}/test_hooks/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (r.status !== 200) throw new Error(`hook ${name}: ${r.status} ${await r.text()}`);
}
