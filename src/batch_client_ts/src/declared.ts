/**
 * The generic client of a canister's declared writes (ic-rusqlite-batch's `writes!` and
 * `client_batches!`): {@link DeclaredWrites} reads the canister's declaration (its
 * `batch_declaration` query, or one given) and packs any op of it, checked against the
 * declaration, into the generic packed request its `execute_writes_packed` method takes. No
 * per-canister code: `{ write: 'add', params: { title: 'milk', due_ns: null } }` is an op of
 * the todo store's `add` write.
 *
 * # The generic packed format (`batch_types::packed`)
 *
 * Integers are LEB128 varints (`uint`), signed ones zigzag-encoded first (`sint`); a real is
 * its 8 IEEE 754 bytes, little-endian; a text or a blob is its byte length as a `uint`, then
 * the bytes (a text's are UTF-8).
 *
 * - Request, version 16: the byte `16`, the declaration's 8-byte digest, the key's
 *   `created_at_time` (8 bytes little-endian) and its 16 id bytes; then per op the index of its
 *   write in the declaration (`uint`) and its parameters in declared order by their declared
 *   kinds (`Integer`: `sint`, `Real`: 8 bytes, `Text` and `Blob`: length and bytes), a
 *   nullable one preceded by a presence byte (`0`: NULL, nothing follows; `1`: a value
 *   follows). No tags: what a byte means follows from the declaration.
 * - Reply, version 17: the byte `17`, a flags byte (bit 0: duplicate), then the outcome
 *   records of the reference canister's replies (one committed, one failed, a run of
 *   committed outcomes with evenly spaced rowids).
 *
 * # The digest
 *
 * The first 8 bytes of the SHA-256 of the text `ic-rusqlite-batch declaration 1\n`, then per
 * write its name, `\0`, its SQL, `\0`, its access (`w` writers, `c` controllers), then per
 * parameter its name, `\0`, its kind (`i`, `r`, `t`, `b`), `?` if nullable else `!`, its size
 * limit as 4 bytes little-endian (`0xffffffff` for none), and `\n` after each write. A
 * {@link DeclaredWrites} recomputes it from the declaration it is given and refuses one whose
 * digest does not match, so what it packs is what the digest names; a canister with another
 * declaration refuses the batch whole (`DeclarationMismatch`, both digests) before anything
 * runs.
 */
import { Actor, type Agent } from '@icp-sdk/core/agent';
import { IDL } from '@icp-sdk/core/candid';
import type { Principal } from '@icp-sdk/core/principal';
import { sha256 } from '@noble/hashes/sha2.js';

import {
  BLOB,
  type BatchCodec,
  CANDID_BLOB_FRAMING,
  type RefusalKind,
  type Reply,
  WRITE_ERROR,
  type WriteError,
  isNotExecuted,
  refusalKindOfRule,
  refusalKindOfWriteError,
  refusalOf,
} from './codec.js';
import { retryOf } from './retry.js';
import type { BatchKey, Outcome } from './types.js';
import type { RejectCode } from './transport.js';
import { I64_MAX, I64_MIN, Reader, Writer, putOutcomes, readOutcomes, utf8Encoder } from './wire.js';

/** The format version of generic requests. */
export const DECLARED_REQUEST_VERSION = 16;
/** The format version of generic replies. */
export const DECLARED_REPLY_VERSION = 17;
/** Bytes before the ops of a generic request: version, digest, `created_at_time`, id. */
export const DECLARED_HEADER_BYTES = 1 + 8 + 8 + 16;
/** Most ops one batch of declared writes holds (the canister refuses more). */
export const MAX_DECLARED_BATCH_OPS = 10_000;

/** The SQL type of a declared parameter. */
export type ParamKind = 'Integer' | 'Real' | 'Text' | 'Blob';
/** Who may call a declared write: the canister's writers, or its controllers only. */
export type Access = 'Writers' | 'Controllers';

/** One declared parameter. */
export interface ParamView {
  name: string;
  kind: ParamKind;
  /** `null` is a value of it. */
  nullable: boolean;
  /** The most bytes of a text (UTF-8) or blob; `null` for no limit. */
  max_bytes: number | null;
}

/** One declared write. */
export interface WriteView {
  name: string;
  /** One statement whose `?1`, `?2`, ... are the parameters in order. */
  sql: string;
  access: Access;
  params: ParamView[];
}

/** A canister's declared writes, in declared order (a write's index is its place), and their digest. */
export interface DeclarationView {
  name: string;
  /** 8 bytes. */
  digest: Uint8Array;
  writes: WriteView[];
}

/** A parameter's value: `bigint` (Integer), `number` (Real), `string` (Text), `Uint8Array` (Blob), `null` (NULL). */
export type ParamValue = bigint | number | string | Uint8Array | null;

/** One op of a declared write: the write's name and its parameters by name. */
export interface DeclaredOp {
  write: string;
  params: Readonly<Record<string, ParamValue>>;
}

/** `DeclarationView` as Candid carries it (the `batch_declaration` query's reply). */
export const DECLARATION_VIEW = IDL.Record({
  name: IDL.Text,
  digest: BLOB,
  writes: IDL.Vec(
    IDL.Record({
      name: IDL.Text,
      sql: IDL.Text,
      access: IDL.Variant({ Writers: IDL.Null, Controllers: IDL.Null }),
      params: IDL.Vec(
        IDL.Record({
          name: IDL.Text,
          kind: IDL.Variant({ Integer: IDL.Null, Real: IDL.Null, Text: IDL.Null, Blob: IDL.Null }),
          nullable: IDL.Bool,
          max_bytes: IDL.Opt(IDL.Nat32),
        }),
      ),
    }),
  ),
});

/** `InvalidParam`: an op's parameters are not what its write declares. */
export interface InvalidParam {
  /** The op's place in its batch (from 0). */
  op: bigint;
  write: string;
  /** Empty when the count is wrong. */
  param: string;
  reason: string;
}

/** Why a canister refused a batch of declared writes whole: nothing of it ran. */
export type BatchRefusal =
  | { NotAuthorized: null }
  | { Refused: WriteError }
  | { InvalidParam: InvalidParam }
  | { DeclarationMismatch: { canister: Uint8Array; request: Uint8Array } }
  | { Malformed: { offset: bigint; what: string } };

/** `BatchRefusal`'s Candid type. */
export const BATCH_REFUSAL = IDL.Variant({
  NotAuthorized: IDL.Null,
  Refused: WRITE_ERROR,
  InvalidParam: IDL.Record({ op: IDL.Nat64, write: IDL.Text, param: IDL.Text, reason: IDL.Text }),
  DeclarationMismatch: IDL.Record({ canister: BLOB, request: BLOB }),
  Malformed: IDL.Record({ offset: IDL.Nat64, what: IDL.Text }),
});

/** `execute_writes_packed`'s reply: `variant { Ok : blob; Err : BatchRefusal }`. */
export const PACKED_WRITES_RESULT = IDL.Variant({ Ok: BLOB, Err: BATCH_REFUSAL });

/**
 * A refusal of a batch of declared writes: `name` is the `BatchRefusal` variant's
 * (`NotAuthorized`, `Refused`, `InvalidParam`, `DeclarationMismatch`, `Malformed`), `detail`
 * its fields as text (for `Refused`, the `WriteError`'s name and fields).
 */
export interface DeclaredRefusal {
  name: 'NotAuthorized' | 'Refused' | 'InvalidParam' | 'DeclarationMismatch' | 'Malformed';
  detail: string;
  refusal: BatchRefusal;
}

const toHex = (bytes: Uint8Array): string => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
const asBytes = (blob: Uint8Array | number[]): Uint8Array => (blob instanceof Uint8Array ? blob : Uint8Array.from(blob));

/** The refusal `refusal` (as the agent's Candid decoder gives it) stands for. */
export function declaredRefusalOf(refusal: BatchRefusal): DeclaredRefusal {
  if ('NotAuthorized' in refusal) return { name: 'NotAuthorized', detail: '', refusal };
  if ('Refused' in refusal) {
    const error = refusalOf(refusal.Refused);
    return { name: 'Refused', detail: error.detail === '' ? error.name : `${error.name}: ${error.detail}`, refusal };
  }
  if ('InvalidParam' in refusal) {
    const e = refusal.InvalidParam;
    const param = e.param === '' ? '' : `, parameter ${e.param}`;
    return { name: 'InvalidParam', detail: `op ${e.op} (${e.write}${param}): ${e.reason}`, refusal };
  }
  if ('DeclarationMismatch' in refusal) {
    const m = { canister: asBytes(refusal.DeclarationMismatch.canister), request: asBytes(refusal.DeclarationMismatch.request) };
    return {
      name: 'DeclarationMismatch',
      detail: `the canister's writes are declaration ${toHex(m.canister)}, the request was packed for declaration ${toHex(m.request)}`,
      refusal: { DeclarationMismatch: m },
    };
  }
  return { name: 'Malformed', detail: `byte ${refusal.Malformed.offset}: ${refusal.Malformed.what}`, refusal };
}

/** Why an op is not one of the declaration's: the write and the parameter named (`param` empty when the op as a whole is wrong). */
export class InvalidOpError extends Error {
  constructor(
    readonly write: string,
    readonly param: string,
    readonly reason: string,
  ) {
    super(`op ${write}${param === '' ? '' : `, parameter ${param}`}: ${reason}`);
    this.name = 'InvalidOpError';
  }
}

/** A declaration that cannot be used: its digest is not the one its writes give, or it is not well formed. */
export class DeclarationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeclarationError';
  }
}

const DIGEST_PREFIX = 'ic-rusqlite-batch declaration 1\n';
const KIND_CODE: Record<ParamKind, string> = { Integer: 'i', Real: 'r', Text: 't', Blob: 'b' };
const PARAM_KINDS = new Set<string>(Object.keys(KIND_CODE));

/** The digest of `writes` (see the module documentation). */
export function declarationDigest(writes: readonly WriteView[]): Uint8Array {
  const parts: Uint8Array[] = [utf8Encoder.encode(DIGEST_PREFIX)];
  const text = (t: string) => parts.push(utf8Encoder.encode(t));
  for (const w of writes) {
    text(`${w.name}\0${w.sql}\0${w.access === 'Controllers' ? 'c' : 'w'}`);
    for (const p of w.params) {
      text(`${p.name}\0${KIND_CODE[p.kind]}${p.nullable ? '?' : '!'}`);
      const limit = new Uint8Array(4);
      new DataView(limit.buffer).setUint32(0, p.max_bytes ?? 0xffffffff, true);
      parts.push(limit);
    }
    text('\n');
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return sha256(all).slice(0, 8);
}

type CandidDeclaration = {
  name: string;
  digest: Uint8Array | number[];
  writes: {
    name: string;
    sql: string;
    access: Record<string, null>;
    params: { name: string; kind: Record<string, null>; nullable: boolean; max_bytes: [] | [number] }[];
  }[];
};

/** The `batch_declaration` query's reply (as the agent's Candid decoder gives it) as a {@link DeclarationView}. */
export function declarationFromCandid(view: CandidDeclaration): DeclarationView {
  return {
    name: view.name,
    digest: asBytes(view.digest),
    writes: view.writes.map((w) => ({
      name: w.name,
      sql: w.sql,
      access: Object.keys(w.access)[0] as Access,
      params: w.params.map((p) => ({
        name: p.name,
        kind: Object.keys(p.kind)[0] as ParamKind,
        nullable: p.nullable,
        max_bytes: p.max_bytes[0] ?? null,
      })),
    })),
  };
}

const batchDeclarationIdl: IDL.InterfaceFactory = ({ IDL: idl }) =>
  idl.Service({ batch_declaration: idl.Func([], [DECLARATION_VIEW], ['query']) });

/** The request a batch of `ops` makes, its key and digest decoded (what the canister reads). */
export interface DecodedRequest {
  digest: Uint8Array;
  key: BatchKey;
  ops: DeclaredOp[];
}

/** A decoded reply. */
export interface DeclaredReply {
  duplicate: boolean;
  outcomes: Outcome[];
}

const hasLoneSurrogate = (s: string): boolean => /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

/**
 * The codec of a canister's declared writes: each batch is the generic packed request (the
 * declaration's digest, the key, each op by its declared types) sent as the Candid `blob`
 * argument of the canister's `execute_writes_packed` (use `new AgentTransport(agent,
 * canisterId, 'execute_writes_packed')`), answered with the outcomes or a typed
 * {@link BatchRefusal}.
 *
 * Every op is checked against the declaration when it is submitted (the batcher measures it
 * then): an unknown write, a missing or extra parameter, a value of the wrong type, `null`
 * where not nullable, a NaN real where not nullable (SQLite binds NaN as NULL), an integer out
 * of the 64-bit range, a text that is not well-formed UTF-16, a text or blob past its size
 * limit throw an {@link InvalidOpError} naming the write and the parameter, and nothing is
 * sent. An op is copied when it is submitted ({@link DeclaredWrites.snapshot}): change or
 * reuse it afterwards and the batch still carries what was checked.
 *
 * `Op` narrows the ops the type checker accepts (for example a union of the canister's writes
 * with their parameter types); the checks run whatever it is.
 */
export class DeclaredWrites<Op extends DeclaredOp = DeclaredOp> implements BatchCodec<Op, Outcome, DeclaredRefusal> {
  readonly headerLen = CANDID_BLOB_FRAMING + DECLARED_HEADER_BYTES;
  readonly declaration: DeclarationView;
  private readonly byName = new Map<string, { index: number; write: WriteView; names: Set<string> }>();
  private readonly packed = new WeakMap<object, Uint8Array>();

  /** The codec of `declaration`; throws a {@link DeclarationError} if its digest is not its writes'. */
  constructor(declaration: DeclarationView) {
    const writes = declaration.writes;
    writes.forEach((write, index) => {
      if (this.byName.has(write.name)) throw new DeclarationError(`two writes named ${write.name}`);
      for (const p of write.params) {
        if (!PARAM_KINDS.has(p.kind)) throw new DeclarationError(`${write.name}.${p.name}: unknown kind ${String(p.kind)}`);
      }
      this.byName.set(write.name, { index, write, names: new Set(write.params.map((p) => p.name)) });
    });
    const digest = declarationDigest(writes);
    if (toHex(digest) !== toHex(declaration.digest)) {
      throw new DeclarationError(
        `declaration ${declaration.name} says digest ${toHex(declaration.digest)}, its writes give ${toHex(digest)}`,
      );
    }
    this.declaration = { ...declaration, digest: Uint8Array.from(declaration.digest) };
  }

  /** The codec of the declaration `canisterId` serves (its `batch_declaration` query). */
  static async fetch<Op extends DeclaredOp = DeclaredOp>(agent: Agent, canisterId: Principal | string): Promise<DeclaredWrites<Op>> {
    const actor = Actor.createActor(batchDeclarationIdl, { agent, canisterId });
    const view = (await actor.batch_declaration!()) as CandidDeclaration;
    return new DeclaredWrites<Op>(declarationFromCandid(view));
  }

  /** The declaration's digest as hex. */
  get digestHex(): string {
    return toHex(this.declaration.digest);
  }

  /**
   * A copy of `op` (its params object copied, blobs too), checked and packed: the batcher keeps
   * it when `op` is submitted, so that the batch carries what was checked however the caller
   * reuses `op` afterwards.
   */
  snapshot(op: Op): Op {
    const params: unknown = typeof op === 'object' && op !== null ? op.params : undefined;
    if (typeof params !== 'object' || params === null) {
      this.packOp(op);
      return op;
    }
    const copied: Record<string, ParamValue> = {};
    for (const [name, value] of Object.entries(params as Record<string, ParamValue>)) {
      copied[name] = value instanceof Uint8Array ? value.slice() : value;
    }
    const copy = { write: op.write, params: copied } as Op;
    this.packOp(copy);
    return copy;
  }

  /** Checks `op` against the declaration; throws an {@link InvalidOpError} naming what is wrong. */
  check(op: Op): void {
    this.packOp(op);
  }

  /** The bytes `op` adds to a request (its write's index and its parameters); checks it first. */
  opLen(op: Op): number {
    return this.packOp(op).length;
  }

  /** The generic packed request of `ops` under `key` (without Candid framing). */
  encodeRequest(key: BatchKey, ops: readonly Op[]): Uint8Array {
    if (key.id.length !== 16) throw new RangeError(`a key id has 16 bytes, not ${key.id.length}`);
    const w = new Writer();
    w.byte(DECLARED_REQUEST_VERSION);
    w.raw(this.declaration.digest);
    w.u64le(key.createdAtTimeNs);
    w.raw(key.id);
    for (const op of ops) w.raw(this.packOp(op));
    return w.finish();
  }

  /** `execute_writes_packed`'s Candid argument for `ops` under `key`. */
  encode(key: BatchKey, ops: readonly Op[]): Uint8Array {
    return new Uint8Array(IDL.encode([BLOB], [this.encodeRequest(key, ops)]));
  }

  /** Reads `execute_writes_packed`'s reply to a batch of `ops` ops; throws if it cannot. */
  decode(reply: Uint8Array, ops: number): Reply<Outcome, DeclaredRefusal> {
    const [result] = IDL.decode([PACKED_WRITES_RESULT], reply) as [{ Ok: Uint8Array | number[] } | { Err: BatchRefusal }];
    if ('Err' in result) return { kind: 'refused', refusal: declaredRefusalOf(result.Err) };
    const decoded = decodeDeclaredReply(asBytes(result.Ok), ops);
    if (decoded.outcomes.length !== ops) throw new Error(`${decoded.outcomes.length} outcomes for a batch of ${ops} ops`);
    return { kind: 'executed', outcomes: decoded.outcomes, duplicate: decoded.duplicate };
  }

  /** Never: the canister refuses with a typed `Err`, not with a reject. */
  refusalOfReject(_code: RejectCode, _message: string): DeclaredRefusal | undefined {
    return undefined;
  }

  /** As the retry table says of the refusal: `Refused` as its `WriteError` (`TooOld`; retried: a full store or queue, a database error); the others final. */
  refusalKind(refusal: DeclaredRefusal): RefusalKind {
    return 'Refused' in refusal.refusal
      ? refusalKindOfWriteError(refusal.refusal.Refused)
      : refusalKindOfRule(retryOf('BatchRefusal', refusal.refusal));
  }

  notExecuted(outcome: Outcome): boolean {
    return isNotExecuted(outcome);
  }

  describe(refusal: DeclaredRefusal): string {
    return refusal.detail === '' ? refusal.name : `${refusal.name}: ${refusal.detail}`;
  }

  /**
   * Reads a generic request as the canister does (its header, then its ops by this
   * declaration, at most `maxOps`), whatever digest it carries; throws a `PackedError` naming
   * the byte offset where it is not one.
   */
  decodeRequest(bytes: Uint8Array, maxOps = MAX_DECLARED_BATCH_OPS): DecodedRequest {
    const r = Reader.withVersion(bytes, DECLARED_REQUEST_VERSION, true);
    const digest = r.array(8, "the declaration's digest");
    const time = r.array(8, 'created_at_time');
    const id = r.array(16, "the key's id");
    const createdAtTimeNs = new DataView(time.buffer, time.byteOffset, 8).getBigUint64(0, true);
    const writes = this.declaration.writes;
    const ops: DeclaredOp[] = [];
    while (!r.done()) {
      if (ops.length === maxOps) throw r.error(`more than ${maxOps} ops`);
      const at = r.offset;
      const index = r.uint('a write index');
      const write = index < BigInt(writes.length) ? writes[Number(index)] : undefined;
      if (write === undefined) {
        r.offset = at;
        throw r.error(`write index ${index}; the declaration has ${writes.length} writes`);
      }
      const params: Record<string, ParamValue> = {};
      for (const p of write.params) {
        if (p.nullable) {
          const presence = r.byte(p.name);
          if (presence === 0) {
            params[p.name] = null;
            continue;
          }
          if (presence !== 1) {
            r.offset -= 1;
            throw r.error(`${p.name}: presence byte ${presence} (0 or 1 expected)`);
          }
        }
        params[p.name] =
          p.kind === 'Integer'
            ? r.sint(p.name)
            : p.kind === 'Real'
              ? r.f64(p.name)
              : p.kind === 'Text'
                ? r.text(p.name)
                : r.bytesField(p.name);
      }
      ops.push({ write: write.name, params });
    }
    return { digest, key: { createdAtTimeNs, id }, ops };
  }

  /** `op` checked and packed (its write's index, then its parameters), from the cache if it was before. */
  private packOp(op: Op): Uint8Array {
    const cached = typeof op === 'object' && op !== null ? this.packed.get(op) : undefined;
    if (cached !== undefined) return cached;
    if (typeof op !== 'object' || op === null || typeof op.write !== 'string') {
      throw new InvalidOpError(String((op as { write?: unknown } | null)?.write), '', 'an op is { write: <name>, params: { ... } }');
    }
    const entry = this.byName.get(op.write);
    if (entry === undefined) {
      const known = this.declaration.writes.map((w) => w.name).join(', ');
      throw new InvalidOpError(op.write, '', `no such write; declaration ${this.declaration.name} has ${known}`);
    }
    const { index, write, names } = entry;
    const params = op.params;
    if (typeof params !== 'object' || params === null) {
      throw new InvalidOpError(write.name, '', 'params must be an object of the parameters by name');
    }
    for (const name of Object.keys(params)) {
      if (!names.has(name) && params[name] !== undefined) {
        const declared = write.params.map((p) => p.name).join(', ') || 'none';
        throw new InvalidOpError(write.name, name, `not a parameter of the write (declared: ${declared})`);
      }
    }
    const w = new Writer();
    w.uint(BigInt(index));
    for (const p of write.params) {
      const value = Object.prototype.hasOwnProperty.call(params, p.name) ? params[p.name] : undefined;
      const invalid = (reason: string) => new InvalidOpError(write.name, p.name, reason);
      if (value === undefined) throw invalid(`missing (${p.nullable ? 'nullable ' : ''}${p.kind})`);
      if (value === null) {
        if (!p.nullable) throw invalid('null; the parameter is not nullable');
        w.byte(0);
        continue;
      }
      const expected = { Integer: 'bigint', Real: 'number', Text: 'string', Blob: 'Uint8Array' }[p.kind];
      const given = value instanceof Uint8Array ? 'Uint8Array' : typeof value;
      if (given !== expected) throw invalid(`a ${given}; ${p.kind} takes a ${expected}`);
      if (p.nullable) w.byte(1);
      switch (p.kind) {
        case 'Integer': {
          const n = value as bigint;
          if (n < I64_MIN || n > I64_MAX) throw invalid(`${n} is out of the 64-bit signed range`);
          w.sint(n);
          break;
        }
        case 'Real': {
          const x = value as number;
          if (Number.isNaN(x) && !p.nullable) throw invalid('NaN, which binds as NULL; the parameter is not nullable');
          w.f64(x);
          break;
        }
        case 'Text': {
          const t = value as string;
          if (hasLoneSurrogate(t)) throw invalid('not well-formed UTF-16 (a lone surrogate): it has no UTF-8 form');
          const bytes = utf8Encoder.encode(t);
          if (p.max_bytes !== null && bytes.length > p.max_bytes) throw invalid(`${bytes.length} bytes; at most ${p.max_bytes}`);
          w.blob(bytes);
          break;
        }
        case 'Blob': {
          const b = value as Uint8Array;
          if (p.max_bytes !== null && b.length > p.max_bytes) throw invalid(`${b.length} bytes; at most ${p.max_bytes}`);
          w.blob(b);
          break;
        }
      }
    }
    const bytes = w.finish();
    this.packed.set(op, bytes);
    return bytes;
  }
}

/** Packs a generic reply (version 17): the flags, then the outcomes (runs as one record). */
export function encodeDeclaredReply(duplicate: boolean, outcomes: readonly Outcome[]): Uint8Array {
  const w = new Writer();
  w.byte(DECLARED_REPLY_VERSION);
  w.byte(duplicate ? 1 : 0);
  putOutcomes(w, outcomes);
  return w.finish();
}

/** Unpacks a generic reply (version 17) of at most `maxOutcomes` outcomes. */
export function decodeDeclaredReply(bytes: Uint8Array, maxOutcomes: number): DeclaredReply {
  const r = Reader.withVersion(bytes, DECLARED_REPLY_VERSION, true);
  const flags = r.byte('the flags byte');
  if ((flags & ~1) !== 0) {
    r.offset -= 1;
    throw r.error(`unknown flags 0x${flags.toString(16).padStart(2, '0')}`);
  }
  return { duplicate: (flags & 1) !== 0, outcomes: readOutcomes(r, maxOutcomes) };
}
