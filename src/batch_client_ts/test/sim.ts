// A simulated database canister and a network that injects faults, on a virtual clock: the
// same fault kinds as the Rust client's tests.
import { IDL } from '@icp-sdk/core/candid';

import type { Scheduler } from '../src/batcher.js';
import type { WriteError } from '../src/codec.js';
import {
  type Outcome,
  type UserOrderOp,
  decodeKeyedOps,
  decodeKeyedOutcomes,
  encodeKeyedOutcomes,
  keyedOpsBody,
} from './reference/packed.js';
import { PACKED_RESULT } from './reference/codec.js';
import { RejectCode, SendError, type Transport } from '../src/transport.js';

const BLOB = IDL.Vec(IDL.Nat8);
export const EPOCH_MS = 1_700_000_000_000;
export const SECOND_NS = 1_000_000_000n;

/** Timers on a virtual clock; `run` advances it from timer to timer. */
export class VirtualScheduler implements Scheduler {
  nowMs = 0;
  private seq = 0;
  private timers: { at: number; seq: number; callback: () => void; cancelled: boolean }[] = [];

  nowNs(): bigint {
    return BigInt(EPOCH_MS + this.nowMs) * 1_000_000n;
  }

  setTimer(ms: number, callback: () => void): unknown {
    const timer = { at: this.nowMs + Math.max(0, ms), seq: this.seq++, callback, cancelled: false };
    this.timers.push(timer);
    return timer;
  }

  clearTimer(handle: unknown): void {
    (handle as { cancelled: boolean }).cancelled = true;
  }

  /** Timers set and neither run nor cleared. */
  pending(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  /** Runs timers in time order until `done()` holds; throws if nothing is left to run. */
  async run(done: () => boolean, limitMs = 24 * 3_600_000): Promise<void> {
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      if (done()) return;
      this.timers = this.timers.filter((t) => !t.cancelled);
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers.shift();
      if (next === undefined) throw new Error('stuck: nothing left to run');
      if (next.at > limitMs) throw new Error('stuck: past the time limit');
      this.nowMs = Math.max(this.nowMs, next.at);
      next.callback();
    }
  }
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

/** A reply's outcomes (without its duplicate flag), or the error, as text. */
function describe(answer: Uint8Array | SendError): string {
  if (answer instanceof SendError) return `${answer.kind} ${answer.code}: ${answer.message}`;
  const [result] = IDL.decode([PACKED_RESULT], answer) as [{ Ok: Uint8Array | number[] } | { Err: WriteError }];
  if ('Err' in result) return JSON.stringify(result.Err, (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value));
  const raw = result.Ok;
  const blob = raw instanceof Uint8Array ? raw : Uint8Array.from(raw);
  const { outcomes } = decodeKeyedOutcomes(blob, 10_000);
  return JSON.stringify(outcomes, (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value));
}

/**
 * The database canister: keyed batches of orders for user 1 (an order for another user fails
 * with the foreign key's code), recorded per caller and key with their outcomes.
 */
export class SimCanister {
  /** Rows per op tag (the order's amount). */
  readonly rows = new Map<number, number>();
  /** The tag of each order id. */
  readonly orderIds = new Map<bigint, number>();
  private nextRowid = 1n;
  private readonly records = new Map<string, { body: string; outcomes: Outcome[] }>();
  stopped = false;
  authorized = true;
  skewNs = 0n;
  /** Ops a batch executes; the rest are "not executed". */
  budget = Number.POSITIVE_INFINITY;
  executions = 0;
  readonly windowNs = 3_600n * SECOND_NS;
  readonly driftNs = 60n * SECOND_NS;

  execute(caller: string, request: Uint8Array, nowNs: bigint): Uint8Array {
    // As the canister answers a refusal: `PackedResult::Err` with the typed error.
    const refused = (error: WriteError) => new Uint8Array(IDL.encode([PACKED_RESULT], [{ Err: error }]));
    if (this.stopped) throw SendError.rejected(RejectCode.CanisterError, 'canister is stopped');
    if (!this.authorized) return refused({ NotAuthorized: null });
    const [raw] = IDL.decode([BLOB], request) as [Uint8Array | number[]];
    const blob = raw instanceof Uint8Array ? raw : Uint8Array.from(raw);
    const { key, body } = keyedOpsBody(blob);
    const { ops } = decodeKeyedOps(blob, 10_000);
    const now = nowNs + this.skewNs;
    const oldest = now - this.windowNs - this.driftNs;
    if (key.createdAtTimeNs < oldest) {
      return refused({ TooOld: { created_at_time: key.createdAtTimeNs, now, oldest_accepted: oldest } });
    }
    if (key.createdAtTimeNs > now + this.driftNs) {
      return refused({
        CreatedInFuture: { created_at_time: key.createdAtTimeNs, now, newest_accepted: now + this.driftNs },
      });
    }
    const id = `${caller}/${key.createdAtTimeNs}/${hex(key.id)}`;
    const recorded = this.records.get(id);
    if (recorded !== undefined) {
      if (recorded.body !== hex(body)) return refused({ DigestMismatch: { created_at_time: key.createdAtTimeNs } });
      return this.reply(true, recorded.outcomes);
    }
    const outcomes = ops.map((op, i) => this.run(op, i));
    this.records.set(id, { body: hex(body), outcomes });
    this.executions += 1;
    return this.reply(false, outcomes);
  }

  private run(op: UserOrderOp, index: number): Outcome {
    if (index >= this.budget) {
      return { NotExecuted: null };
    }
    if ('CreateOrder' in op) {
      if (op.CreateOrder.user_id !== 1n) return { Failed: { code: 787, message: 'FOREIGN KEY constraint failed' } };
      const tag = op.CreateOrder.amount;
      const rowid = this.nextRowid++;
      this.rows.set(tag, (this.rows.get(tag) ?? 0) + 1);
      this.orderIds.set(rowid, tag);
      return { Committed: { rows_changed: 1n, last_insert_rowid: rowid } };
    }
    return { Committed: { rows_changed: 0n, last_insert_rowid: 0n } };
  }

  private reply(duplicate: boolean, outcomes: Outcome[]): Uint8Array {
    return new Uint8Array(IDL.encode([PACKED_RESULT], [{ Ok: encodeKeyedOutcomes(duplicate, outcomes) }]));
  }
}

export type Fault =
  | 'none'
  | 'replyLostAfterCommit'
  | 'timeout'
  | 'transportError'
  | 'delayedReply'
  | 'delayedDelivery'
  | 'sentTwice'
  | 'stopped';

export const FAULTS: Fault[] = [
  'replyLostAfterCommit',
  'timeout',
  'transportError',
  'delayedReply',
  'delayedDelivery',
  'sentTwice',
  'stopped',
];

/** xorshift64*: a deterministic stream. */
export class Random {
  constructor(private state: bigint) {}

  next(): bigint {
    let s = this.state;
    s ^= s >> 12n;
    s ^= (s << 25n) & 0xffff_ffff_ffff_ffffn;
    s ^= s >> 27n;
    this.state = s;
    return (s * 0x2545_f491_4f6c_dd1dn) & 0xffff_ffff_ffff_ffffn;
  }

  below(n: number): number {
    return Number(this.next() % BigInt(n));
  }
}

/** The network between one caller and the canister, with scripted or random faults. */
export class FaultyNetwork implements Transport {
  readonly injected = new Map<Fault, number>();
  twinsDiffer = 0;
  private readonly script: Fault[];
  random: { rng: Random; percent: number } | undefined;
  /** Longer than the client's attempt timeout. */
  lateMs = 3_000;

  constructor(
    private readonly canister: SimCanister,
    private readonly scheduler: VirtualScheduler,
    script: Fault[] = [],
    private readonly caller = 'client principal',
  ) {
    this.script = [...script];
  }

  private nextFault(): Fault {
    let fault: Fault = 'none';
    if (this.random !== undefined) {
      const { rng, percent } = this.random;
      if (rng.below(100) < percent) fault = FAULTS[rng.below(FAULTS.length)]!;
    } else {
      fault = this.script.shift() ?? 'none';
    }
    this.injected.set(fault, (this.injected.get(fault) ?? 0) + 1);
    return fault;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.scheduler.setTimer(ms, resolve));
  }

  /** Resolves after `ms`, or rejects when `signal` aborts first (the client hung up). */
  private wait(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const abort = () => {
        this.scheduler.clearTimer(timer);
        reject(signal.reason as Error);
      };
      const timer = this.scheduler.setTimer(ms, () => {
        signal.removeEventListener('abort', abort);
        resolve();
      });
      signal.addEventListener('abort', abort, { once: true });
    });
  }

  /** Never answers; rejects when `signal` aborts. */
  private hang(signal: AbortSignal): Promise<Uint8Array> {
    return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));
  }

  private run(request: Uint8Array): Uint8Array {
    return this.canister.execute(this.caller, request, this.scheduler.nowNs());
  }

  /** Calls not settled yet, and calls whose signal the client aborted. */
  openCalls = 0;
  aborted = 0;

  async call(request: Uint8Array, signal: AbortSignal): Promise<Uint8Array> {
    this.openCalls += 1;
    signal.addEventListener('abort', () => (this.aborted += 1), { once: true });
    try {
      return await this.answer(request, signal);
    } finally {
      this.openCalls -= 1;
    }
  }

  private async answer(request: Uint8Array, signal: AbortSignal): Promise<Uint8Array> {
    switch (this.nextFault()) {
      case 'none':
        return this.run(request);
      case 'replyLostAfterCommit':
        try {
          this.run(request);
        } catch {
          // The client sees no answer either way.
        }
        throw SendError.unknown('connection closed before the reply');
      case 'timeout':
        return this.hang(signal);
      case 'transportError':
        throw SendError.unknown('connection refused');
      case 'delayedReply': {
        let reply: Uint8Array | SendError;
        try {
          reply = this.run(request);
        } catch (error) {
          reply = error as SendError;
        }
        await this.wait(this.lateMs, signal);
        if (reply instanceof SendError) throw reply;
        return reply;
      }
      case 'delayedDelivery':
        void this.sleep(this.lateMs * 2).then(() => {
          try {
            this.run(request);
          } catch {
            // Nobody waits for this answer.
          }
        });
        return this.hang(signal);
      case 'sentTwice': {
        // The IC runs messages one at a time: one runs the batch, the other is answered from
        // its record with the same outcomes.
        const attempt = (): Uint8Array | SendError => {
          try {
            return this.run(request);
          } catch (error) {
            return error as SendError;
          }
        };
        const first = attempt();
        const second = attempt();
        if (describe(first) !== describe(second)) this.twinsDiffer += 1;
        if (first instanceof SendError) throw first;
        return first;
      }
      case 'stopped':
        throw SendError.rejected(RejectCode.CanisterError, 'canister is stopped');
    }
  }
}
