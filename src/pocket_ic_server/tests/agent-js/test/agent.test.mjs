// The JS agent (@icp-sdk/core) against `offline-pocket-ic --replica`: it deploys the reference
// canister through the management canister and calls it with every check of the agent on
// (certificates, their BLS signatures and time, the subnet delegation and canister ranges,
// node-signed queries); only the root key is fetched (`shouldFetchRootKey`), as local
// development does. Then what the replica refuses, deduplication and the fault hooks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { HttpAgent, Actor, UncertifiedRejectUpdateErrorCode, AgentError, SignIdentity } from '@icp-sdk/core/agent';
import { IDL } from '@icp-sdk/core/candid';
import { Ed25519KeyIdentity } from '@icp-sdk/core/identity';
import { Secp256k1KeyIdentity } from '@icp-sdk/core/identity/secp256k1';
import { Principal } from '@icp-sdk/core/principal';
import { startReplica, hook, canisterWasm } from './replica.mjs';

/** @type {{ url: string, stop: () => void }} */
let replica;
before(async () => {
  replica = await startReplica();
});
after(() => replica?.stop());

/** The management canister methods the tests use. @type {IDL.InterfaceFactory} */
const managementIdl = ({ IDL }) => {
  const settings = IDL.Record({ controllers: IDL.Opt(IDL.Vec(IDL.Principal)) });
  return IDL.Service({
    provisional_create_canister_with_cycles: IDL.Func(
      [IDL.Record({ amount: IDL.Opt(IDL.Nat), settings: IDL.Opt(settings), specified_id: IDL.Opt(IDL.Principal), sender_canister_version: IDL.Opt(IDL.Nat64) })],
      [IDL.Record({ canister_id: IDL.Principal })],
      [],
    ),
    install_code: IDL.Func(
      [IDL.Record({
        mode: IDL.Variant({ install: IDL.Null, reinstall: IDL.Null, upgrade: IDL.Opt(IDL.Record({})) }),
        canister_id: IDL.Principal,
        wasm_module: IDL.Vec(IDL.Nat8),
        arg: IDL.Vec(IDL.Nat8),
        sender_canister_version: IDL.Opt(IDL.Nat64),
      })],
      [],
      [],
    ),
  });
};

/** The reference canister's methods the tests use. @type {IDL.InterfaceFactory} */
const benchIdl = ({ IDL }) => {
  const Outcome = IDL.Variant({
    Committed: IDL.Record({ rows_changed: IDL.Nat64, last_insert_rowid: IDL.Int64 }),
    Failed: IDL.Record({ code: IDL.Int32, message: IDL.Text }),
  });
  // The errors as the tests meet them (a reply may name only the cases it uses: Candid subtyping).
  const WriteError = IDL.Variant({ NotAuthorized: IDL.Null, Invalid: IDL.Text, Database: IDL.Text });
  const QueryError = IDL.Variant({ Database: IDL.Text });
  return IDL.Service({
    create_user: IDL.Func([IDL.Text, IDL.Text], [IDL.Variant({ Ok: Outcome, Err: WriteError })], []),
    counts: IDL.Func([], [IDL.Variant({ Ok: IDL.Record({ users: IDL.Nat64, orders: IDL.Nat64 }), Err: QueryError })], ['query']),
  });
};

const LXZZE = Principal.fromText('lxzze-o7777-77777-aaaaa-cai');

/**
 * An agent with `identity` that fetched the root key.
 * @param {import('@icp-sdk/core/agent').Identity} identity
 */
async function agentWith(identity) {
  return HttpAgent.create({ host: replica.url, identity, shouldFetchRootKey: true });
}

/**
 * Creates a canister and installs the reference canister (gzipped: the module is over the
 * 2 MiB ingress limit).
 * @param {HttpAgent} agent
 * @returns {Promise<Principal>}
 */
async function deploy(agent) {
  const create = Actor.createActor(managementIdl, { agent, canisterId: Principal.managementCanister(), effectiveCanisterId: LXZZE });
  const { canister_id } = /** @type {{ canister_id: Principal }} */ (
    await create.provisional_create_canister_with_cycles({ amount: [100_000_000_000_000n], settings: [], specified_id: [], sender_canister_version: [] })
  );
  const install = Actor.createActor(managementIdl, { agent, canisterId: Principal.managementCanister(), effectiveCanisterId: canister_id });
  await install.install_code({
    mode: { install: null },
    canister_id,
    wasm_module: [...gzipSync(readFileSync(canisterWasm))],
    arg: [...IDL.encode([IDL.Opt(IDL.Record({}))], [[]])],
    sender_canister_version: [],
  });
  return canister_id;
}

/**
 * @param {HttpAgent} agent
 * @param {Principal} canisterId
 */
function bench(agent, canisterId) {
  return /** @type {{ create_user: (n: string, e: string) => Promise<any>, counts: () => Promise<{ Ok: { users: bigint, orders: bigint } }> }} */ (
    /** @type {unknown} */ (Actor.createActor(benchIdl, { agent, canisterId }))
  );
}

test('deploys the canister, calls an update and a query, with certificate verification on', async () => {
  const agent = await agentWith(Ed25519KeyIdentity.generate());
  const canisterId = await deploy(agent);
  const actor = bench(agent, canisterId);
  assert.deepEqual(await actor.create_user('alice', 'alice@example.com'), { Ok: { Committed: { rows_changed: 1n, last_insert_rowid: 1n } } });
  assert.deepEqual(await actor.counts(), { Ok: { users: 1n, orders: 0n } });
  // secp256k1 too (the canister lets only controllers write, so it is refused in inspect_message).
  const k1 = bench(await agentWith(Secp256k1KeyIdentity.generate()), canisterId);
  await assert.rejects(k1.create_user('mallory', 'm@example.com'), (/** @type {any} */ e) => {
    assert.ok(e instanceof AgentError);
    assert.ok(e.cause.code instanceof UncertifiedRejectUpdateErrorCode, String(e));
    assert.equal(e.cause.code.rejectCode, 4);
    assert.equal(e.cause.code.rejectErrorCode, 'IC0406');
    return true;
  });
  assert.deepEqual(await actor.counts(), { Ok: { users: 1n, orders: 0n } });
});

test('a missing method is refused by the canister\'s ingress filter with the replica codes', async () => {
  // The canister's canister_inspect_message admits only the update methods of its interface:
  // the call is refused before any execution (an uncertified reject, nothing in the state tree).
  const agent = await agentWith(Ed25519KeyIdentity.generate());
  const canisterId = await deploy(agent);
  await assert.rejects(
    agent.update(canisterId, { methodName: 'no_such_method', arg: IDL.encode([], []) }),
    (/** @type {any} */ e) => {
      assert.ok(e.cause.code instanceof UncertifiedRejectUpdateErrorCode, String(e));
      assert.equal(e.cause.code.rejectCode, 4);
      assert.equal(e.cause.code.rejectErrorCode, 'IC0406');
      assert.match(e.cause.code.rejectMessage, /rejected the message/);
      return true;
    },
  );
});

/** An identity that signs with another's key but corrupts every signature. */
class ForgingIdentity extends SignIdentity {
  /** @param {Ed25519KeyIdentity} inner */
  constructor(inner) {
    super();
    this.inner = inner;
  }
  getPublicKey() {
    return this.inner.getPublicKey();
  }
  /** @param {Uint8Array} challenge */
  async sign(challenge) {
    const sig = new Uint8Array(await this.inner.sign(challenge));
    sig[0] ^= 1;
    return /** @type {any} */ (sig);
  }
}

test('a wrong signature is refused and nothing executes', async () => {
  const owner = Ed25519KeyIdentity.generate();
  const agent = await agentWith(owner);
  const canisterId = await deploy(agent);
  const forger = new ForgingIdentity(owner);
  const forged = bench(await agentWith(forger), canisterId);
  await assert.rejects(forged.create_user('forged', 'f@example.com'), /Invalid signature/);
  assert.deepEqual(await bench(agent, canisterId).counts(), { Ok: { users: 0n, orders: 0n } });
});

test('an expired request is refused', async () => {
  const agent = await agentWith(Ed25519KeyIdentity.generate());
  const canisterId = await deploy(agent);
  // Signed after this transform: a valid signature on an expiry in the past.
  agent.addTransform('update', async (request) => {
    const body = /** @type {any} */ (request).body;
    body.ingress_expiry.__expiry__ = BigInt(Date.now() - 60_000) * 1_000_000n;
    return request;
  });
  await assert.rejects(
    agent.call(canisterId, { methodName: 'create_user', arg: IDL.encode([IDL.Text, IDL.Text], ['late', 'l@example.com']) }),
    /Invalid request expiry/,
  );
});

test('an identical request executes once', async () => {
  const agent = await agentWith(Ed25519KeyIdentity.generate());
  const canisterId = await deploy(agent);
  const arg = IDL.encode([IDL.Text, IDL.Text], ['once', 'o@example.com']);
  const nonce = new Uint8Array(16).fill(7);
  // The same nonce and the same expiry (rounded to the minute): the same request id.
  let first, second;
  for (;;) {
    first = await agent.call(canisterId, { methodName: 'create_user', arg, nonce: /** @type {any} */ (nonce) });
    second = await agent.call(canisterId, { methodName: 'create_user', arg, nonce: /** @type {any} */ (nonce) });
    if (Buffer.from(first.requestId).equals(Buffer.from(second.requestId))) break;
  }
  assert.equal(first.response.status, 200);
  assert.equal(second.response.status, 200);
  assert.deepEqual(await bench(agent, canisterId).counts(), { Ok: { users: 1n, orders: 0n } });
});

test('fault hooks: a dropped answer commits, a stopped canister refuses', async () => {
  const controller = Ed25519KeyIdentity.generate();
  const agent = await agentWith(controller);
  const canisterId = await deploy(agent);
  await hook(replica.url, 'drop_replies', { count: 1 });
  // The controller again (a stranger's write would be refused by the canister's ingress filter),
  // through an agent that gives up after 2 s and never retries.
  const slow = await HttpAgent.create({
    host: replica.url,
    identity: controller,
    shouldFetchRootKey: true,
    retryTimes: 0,
    fetch: (/** @type {any} */ input, /** @type {any} */ init) => fetch(input, { ...init, signal: AbortSignal.timeout(2000) }),
  });
  await assert.rejects(
    slow.call(canisterId, { methodName: 'create_user', arg: IDL.encode([IDL.Text, IDL.Text], ['d', 'd@example.com']) }),
  );
  // The answer was dropped, not the call: the user was created.
  assert.deepEqual(await bench(agent, canisterId).counts(), { Ok: { users: 1n, orders: 0n } });
  await hook(replica.url, 'stop_canister', { canister_id: canisterId.toText() });
  await assert.rejects(bench(agent, canisterId).create_user('x', 'x@example.com'), (/** @type {any} */ e) => {
    assert.equal(e.cause.code.rejectErrorCode, 'IC0508');
    return true;
  });
  await hook(replica.url, 'start_canister', { canister_id: canisterId.toText() });
  assert.deepEqual(await bench(agent, canisterId).create_user('y', 'y@example.com'), { Ok: { Committed: { rows_changed: 1n, last_insert_rowid: 2n } } });
});
