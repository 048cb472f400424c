// The offline replica for end-to-end tests: `offline-pocket-ic --replica --test-hooks` (built by
// `cargo build --release -p pocket_ic_server`), its test hooks (drop or delay replies, stop and
// start a canister), and a fresh canister installed from a wasm in target/canister by the
// identity that then calls it.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

import { Actor, HttpAgent } from '@icp-sdk/core/agent';
import { IDL } from '@icp-sdk/core/candid';
import { Ed25519KeyIdentity } from '@icp-sdk/core/identity';
import { Principal } from '@icp-sdk/core/principal';

/** The repository's root (test files run from src/batch_client_ts/dist/test). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
export const serverBinary = process.env.OFFLINE_POCKET_IC_BIN ?? join(repoRoot, 'target/release/offline-pocket-ic');

/** A canister wasm built into target/canister. */
export function canisterWasm(name: string): string {
  return join(repoRoot, 'target/canister', `${name}.wasm`);
}

/** A running replica: its URL, and `stop` to end it. */
export interface Replica {
  url: string;
  stop(): void;
}

/** Starts the replica with its test hooks; throws if the server or a needed wasm is missing. */
export async function startReplica(wasms: Record<string, string>): Promise<Replica> {
  for (const [what, path] of [['the server (cargo build --release -p pocket_ic_server)', serverBinary], ...Object.entries(wasms)] as const) {
    if (!existsSync(path)) throw new Error(`missing ${what}: ${path}`);
  }
  const portFile = join(mkdtempSync(join(tmpdir(), 'batch-client-e2e-')), 'port');
  const child: ChildProcess = spawn(
    serverBinary,
    ['--replica', '--test-hooks', '--mute-canister-output', '--ttl', '600', '--port-file', portFile],
    { stdio: 'ignore' },
  );
  const started = Date.now();
  for (;;) {
    if (existsSync(portFile)) {
      const text = readFileSync(portFile, 'utf8');
      if (text.endsWith('\n')) return { url: `http://127.0.0.1:${text.trim()}`, stop: () => child.kill('SIGKILL') };
    }
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    if (Date.now() - started > 60_000) {
      child.kill();
      throw new Error('the server wrote no port file');
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Calls test hook `name` (`drop_replies`, `delay_replies`, `stop_canister`, `start_canister`). */
export async function hook(url: string, name: string, body: object): Promise<void> {
  const r = await fetch(`${url}/test_hooks/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (r.status !== 200) throw new Error(`hook ${name}: ${r.status} ${await r.text()}`);
}

const managementIdl: IDL.InterfaceFactory = ({ IDL }) =>
  IDL.Service({
    provisional_create_canister_with_cycles: IDL.Func(
      [
        IDL.Record({
          amount: IDL.Opt(IDL.Nat),
          settings: IDL.Opt(IDL.Record({ controllers: IDL.Opt(IDL.Vec(IDL.Principal)) })),
          specified_id: IDL.Opt(IDL.Principal),
          sender_canister_version: IDL.Opt(IDL.Nat64),
        }),
      ],
      [IDL.Record({ canister_id: IDL.Principal })],
      [],
    ),
    install_code: IDL.Func(
      [
        IDL.Record({
          mode: IDL.Variant({ install: IDL.Null, reinstall: IDL.Null, upgrade: IDL.Opt(IDL.Record({})) }),
          canister_id: IDL.Principal,
          wasm_module: IDL.Vec(IDL.Nat8),
          arg: IDL.Vec(IDL.Nat8),
          sender_canister_version: IDL.Opt(IDL.Nat64),
        }),
      ],
      [],
      [],
    ),
  });

const LXZZE = Principal.fromText('lxzze-o7777-77777-aaaaa-cai');

/** An agent of a fresh identity on the replica. */
export function newAgent(url: string): Promise<HttpAgent> {
  return HttpAgent.create({ host: url, identity: Ed25519KeyIdentity.generate(), shouldFetchRootKey: true });
}

/**
 * A fresh canister of `wasm`, installed with no init argument (`opt` absent: the defaults) by
 * `agent`'s identity, its controller.
 */
export async function deploy(agent: HttpAgent, wasm: string): Promise<Principal> {
  const create = Actor.createActor(managementIdl, { agent, canisterId: Principal.managementCanister(), effectiveCanisterId: LXZZE });
  const { canister_id: canisterId } = (await create.provisional_create_canister_with_cycles!({
    amount: [100_000_000_000_000n],
    settings: [],
    specified_id: [],
    sender_canister_version: [],
  })) as { canister_id: Principal };
  const install = Actor.createActor(managementIdl, { agent, canisterId: Principal.managementCanister(), effectiveCanisterId: canisterId });
  await install.install_code!({
    mode: { install: null },
    canister_id: canisterId,
    wasm_module: [...gzipSync(readFileSync(wasm))],
    arg: [...IDL.encode([IDL.Opt(IDL.Record({}))], [[]])],
    sender_canister_version: [],
  });
  return canisterId;
}
