/**
 * The batcher: Marlin.BatchOps' semantics on the Internet Computer, with exactly-once batches.
 * `submit(op)` resolves to that op's outcome; ops leave in keyed batches when enough are queued
 * or the oldest has waited `maxDelayMs`; a batch without an answer is sent again with the same
 * bytes and key until it is answered or its retry window closes.
 */
import type { BatchCodec } from './codec.js';
import type { BatchKey } from './types.js';
import { OrderedQueue } from './queue.js';
import { RejectCode, SendError, type Transport, rejectIsRetried, rejectMayHaveRun } from './transport.js';

/** The IC's largest ingress message: 2 MiB. */
export const IC_MAX_MESSAGE_BYTES = 2 * 1024 * 1024;
/** Bytes left for the envelope of an ingress message (signature, delegations, ...). */
export const ENVELOPE_RESERVE_BYTES = 32 * 1024;

/**
 * How a {@link Batcher} forms, sends and retries batches. Every setting with its default is in
 * the README's settings table (the defaults are {@link defaultConfig}'s, the Rust client's,
 * checked by test/twins.test.ts).
 */
export interface BatcherConfig {
  /** Size trigger, and most ops per batch. */
  maxBatchOps: number;
  /** Most bytes per request (the codec's header and the ops). */
  maxRequestBytes: number;
  /** Delay trigger: the oldest queued op waits at most this long. */
  maxDelayMs: number;
  /** Client queue bound in ops; `enqueue` waits for room, `trySubmit` throws. */
  maxQueuedOps: number;
  /** Client queue bound in bytes. */
  maxQueuedBytes: number;
  /** Batches in flight at once; they may run in any order (see {@link SubmitOptions.orderingKey}). */
  maxInFlight: number;
  /** First wait before a retry, doubled per attempt. */
  initialBackoffMs: number;
  /** Longest wait between attempts. */
  maxBackoffMs: number;
  /** Retries stop this long after the key was created (below the canister's window). */
  retryForMs: number;
  /** An attempt unanswered after this long is abandoned as unknown (its call aborted) and retried; `undefined`: never. */
  attemptTimeoutMs: number | undefined;
  /** Times an op the canister did not execute is sent again under a new key. */
  maxResubmits: number;
  /** 8 bytes that start every key id of the batcher. */
  keyPrefix: Uint8Array;
}

/** Defaults of {@link BatcherConfig}. */
export function defaultConfig(): BatcherConfig {
  const keyPrefix = new Uint8Array(8);
  globalThis.crypto.getRandomValues(keyPrefix);
  return {
    maxBatchOps: 10_000,
    maxRequestBytes: IC_MAX_MESSAGE_BYTES - ENVELOPE_RESERVE_BYTES,
    maxDelayMs: 50,
    maxQueuedOps: 100_000,
    maxQueuedBytes: 64 * 1024 * 1024,
    maxInFlight: 4,
    initialBackoffMs: 100,
    maxBackoffMs: 10_000,
    retryForMs: 24 * 60 * 60 * 1000,
    attemptTimeoutMs: undefined,
    maxResubmits: 8,
    keyPrefix,
  };
}

/** The clock and timers a batcher uses (injected by tests; the default is the real ones). */
export interface Scheduler {
  /** Nanoseconds since the Unix epoch (keys' creation times). */
  nowNs(): bigint;
  setTimer(ms: number, callback: () => void): unknown;
  clearTimer(handle: unknown): void;
}

/** `Date.now()` and `setTimeout`. */
export const realScheduler: Scheduler = {
  nowNs: () => BigInt(Date.now()) * 1_000_000n,
  setTimer: (ms, callback) => setTimeout(callback, ms),
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * Why an op got no outcome: `refused` (the canister refused its batch and nothing ran),
 * `rejected` (the IC rejected every attempt and nothing ran), `unknown` (an attempt went
 * unanswered and retries stopped: the op ran at most once), `badReply` (the reply could not be
 * read: it may have run), `closed` (the batcher was closed before the op was sent).
 */
export class BatchError<R> extends Error {
  constructor(
    readonly kind: 'refused' | 'rejected' | 'unknown' | 'badReply' | 'closed',
    message: string,
    readonly refusal?: R,
    readonly code?: RejectCode,
  ) {
    super(message);
    this.name = 'BatchError';
  }
}

/** `trySubmit` on a full queue. */
export class QueueFullError extends Error {
  constructor() {
    super('the client queue is full');
    this.name = 'QueueFullError';
  }
}

/** How one op is submitted. */
export interface SubmitOptions {
  /**
   * Ops submitted with one ordering key are committed in the order they were submitted: a
   * batch holding ops of the key is sent only once the previous batch holding ops of it is
   * settled (answered, retried until answered, or given up), so at most one batch per key is
   * in flight and a retry never lets a later batch of the key pass. Ops without a key (and
   * of other keys) keep leaving while they wait. Ops of one batch run in order, in one
   * transaction.
   */
  orderingKey?: string;
}

/** Counters of a {@link Batcher}. */
export interface BatcherStats {
  submitted: number;
  queued: number;
  inFlight: number;
  batches: number;
  attempts: number;
  retries: number;
  duplicateReplies: number;
  outcomes: number;
  refused: number;
  unknown: number;
  resubmitted: number;
}

interface Slot<Op, O, R> {
  op: Op;
  len: number;
  submittedNs: bigint;
  seq: number;
  orderingKey: string | undefined;
  resubmits: number;
  resolve: (outcome: O) => void;
  reject: (error: BatchError<R>) => void;
}

interface InFlight<Op, O, R> {
  key: BatchKey;
  /** The ordering keys of its ops, held until it is settled. */
  orderingKeys: string[];
  request: Uint8Array;
  slots: Slot<Op, O, R>[];
  attempts: number;
  possiblyExecuted: boolean;
}

type Attempt = { ok: true; reply: Uint8Array } | { ok: false; error: SendError };

/** Exactly-once write batching (see the module documentation and the README). */
export class Batcher<Op, O, R> {
  readonly config: BatcherConfig;
  private readonly queue = new OrderedQueue<Slot<Op, O, R>>();
  private nextSeq = 0;
  private inFlight = 0;
  /** Transport calls not yet settled, abandoned ones included. */
  private calls = 0;
  private counter = 0n;
  private closed = false;
  private flushRequested = false;
  private roomWaiters: Array<() => void> = [];
  private idleWaiters: Array<() => void> = [];
  private timer: { handle: unknown; atNs: bigint } | undefined;
  private readonly counters: Omit<BatcherStats, 'queued' | 'inFlight'> = {
    submitted: 0,
    batches: 0,
    attempts: 0,
    retries: 0,
    duplicateReplies: 0,
    outcomes: 0,
    refused: 0,
    unknown: 0,
    resubmitted: 0,
  };

  constructor(
    private readonly codec: BatchCodec<Op, O, R>,
    private readonly transport: Transport,
    config: Partial<BatcherConfig> = {},
    private readonly scheduler: Scheduler = realScheduler,
  ) {
    this.config = { ...defaultConfig(), ...config };
    const c = this.config;
    for (const [name, value] of [
      ['maxBatchOps', c.maxBatchOps],
      ['maxQueuedOps', c.maxQueuedOps],
      ['maxInFlight', c.maxInFlight],
      ['retryForMs', c.retryForMs],
    ] as const) {
      if (!(value >= 1)) throw new RangeError(`${name} must be at least 1`);
    }
    if (c.maxQueuedOps < c.maxBatchOps) throw new RangeError('maxQueuedOps must be at least maxBatchOps');
    if (c.maxRequestBytes <= codec.headerLen) throw new RangeError("maxRequestBytes must exceed the codec's header");
    if (c.maxQueuedBytes < c.maxRequestBytes) throw new RangeError('maxQueuedBytes must be at least maxRequestBytes');
    if (c.keyPrefix.length !== 8) throw new RangeError('keyPrefix must have 8 bytes');
  }

  /**
   * Queues `op`, waiting for room while the queue is full (backpressure), and resolves once it
   * is queued, to an object holding the promise of its outcome.
   */
  async enqueue(op: Op, options: SubmitOptions = {}): Promise<{ outcome: Promise<O> }> {
    for (;;) {
      const queued = this.tryEnqueue(op, options);
      if (queued !== undefined) return { outcome: queued };
      await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
    }
  }

  /** Queues `op` (waiting for room) and resolves to its outcome, or rejects with a {@link BatchError}. */
  async submit(op: Op, options: SubmitOptions = {}): Promise<O> {
    return (await this.enqueue(op, options)).outcome;
  }

  /** Queues `op` now and returns the promise of its outcome; throws {@link QueueFullError} when full. */
  trySubmit(op: Op, options: SubmitOptions = {}): Promise<O> {
    const queued = this.tryEnqueue(op, options);
    if (queued === undefined) throw new QueueFullError();
    return queued;
  }

  private tryEnqueue(given: Op, { orderingKey }: SubmitOptions): Promise<O> | undefined {
    if (this.closed) throw new Error('the batcher is closed');
    const op = this.codec.snapshot ? this.codec.snapshot(given) : given;
    const len = this.codec.opLen(op);
    const room = this.config.maxRequestBytes - this.codec.headerLen;
    if (len > room) throw new RangeError(`the op takes ${len} bytes; a request holds at most ${room} bytes of ops`);
    if (this.queue.length >= this.config.maxQueuedOps || this.queue.bytes + len > this.config.maxQueuedBytes) {
      return undefined;
    }
    const submittedNs = this.scheduler.nowNs();
    const seq = this.nextSeq++;
    const outcome = new Promise<O>((resolve, reject) => {
      this.queue.push({ op, len, submittedNs, seq, orderingKey, resubmits: 0, resolve, reject });
    });
    this.counters.submitted += 1;
    this.pump();
    return outcome;
  }

  /** Makes everything queued due now. */
  flush(): void {
    this.flushRequested = true;
    this.pump();
  }

  /**
   * Refuses further submits, sends what is queued, and resolves once every batch is answered
   * and every transport call has settled (an abandoned attempt is aborted, see
   * {@link Transport}): nothing of the batcher is left running, no timer, no socket.
   */
  close(): Promise<void> {
    this.closed = true;
    for (const wake of this.roomWaiters.splice(0)) wake();
    this.pump();
    return new Promise((resolve) => {
      this.idleWaiters.push(resolve);
      this.checkIdle();
    });
  }

  stats(): BatcherStats {
    return { ...this.counters, queued: this.queue.length, inFlight: this.inFlight };
  }

  /** Whether the ops that may leave now fill a batch. */
  private sizeReached(): boolean {
    const { ops, bytes } = this.queue.eligible();
    return ops >= this.config.maxBatchOps || bytes + this.codec.headerLen >= this.config.maxRequestBytes;
  }

  private dueAtNs(): bigint | undefined {
    if (this.inFlight >= this.config.maxInFlight) return undefined;
    const front = this.queue.front();
    if (front === undefined) return undefined;
    if (this.closed || this.flushRequested || this.sizeReached()) return 0n;
    return front.submittedNs + BigInt(Math.round(this.config.maxDelayMs * 1e6));
  }

  /** Sends every due batch and arms the timer for the next (or clears it: nothing waits). */
  private pump(): void {
    for (;;) {
      const at = this.dueAtNs();
      if (at === undefined) {
        this.disarm();
        return;
      }
      const now = this.scheduler.nowNs();
      if (at > now) {
        this.arm(at, now);
        return;
      }
      const batch = this.takeBatch(now);
      void this.attempt(batch, 0);
    }
  }

  private disarm(): void {
    if (this.timer === undefined) return;
    this.scheduler.clearTimer(this.timer.handle);
    this.timer = undefined;
  }

  private arm(atNs: bigint, nowNs: bigint): void {
    if (this.timer !== undefined) {
      if (this.timer.atNs <= atNs) return;
      this.scheduler.clearTimer(this.timer.handle);
    }
    const ms = Number((atNs - nowNs + 999_999n) / 1_000_000n);
    const handle = this.scheduler.setTimer(ms, () => {
      this.timer = undefined;
      this.pump();
    });
    this.timer = { handle, atNs };
  }

  /** The oldest ops that may leave, up to the bounds; the batch holds their ordering keys. */
  private takeBatch(nowNs: bigint): InFlight<Op, O, R> {
    let bytes = this.codec.headerLen;
    const slots: Slot<Op, O, R>[] = [];
    const orderingKeys = new Set<string>();
    // The keys are held once the batch is formed: until then their later ops join it, in order.
    for (;;) {
      const front = this.queue.front();
      if (front === undefined || slots.length === this.config.maxBatchOps || bytes + front.len > this.config.maxRequestBytes) break;
      const slot = this.queue.popFront();
      bytes += slot.len;
      if (slot.orderingKey !== undefined) orderingKeys.add(slot.orderingKey);
      slots.push(slot);
    }
    const keys = [...orderingKeys];
    this.queue.hold(keys);
    this.inFlight += 1;
    this.counters.batches += 1;
    if (this.queue.length === 0) this.flushRequested = false;
    const id = new Uint8Array(16);
    id.set(this.config.keyPrefix, 0);
    new DataView(id.buffer).setBigUint64(8, this.counter, false);
    this.counter += 1n;
    const key = { createdAtTimeNs: nowNs, id };
    const request = this.codec.encode(
      key,
      slots.map((slot) => slot.op),
    );
    for (const wake of this.roomWaiters.splice(0)) wake();
    return { key, orderingKeys: keys, request, slots, attempts: 0, possiblyExecuted: false };
  }

  private async attempt(batch: InFlight<Op, O, R>, delayMs: number): Promise<void> {
    if (delayMs > 0) await new Promise<void>((resolve) => this.scheduler.setTimer(delayMs, resolve));
    let result: Attempt;
    try {
      result = { ok: true, reply: await this.send(batch.request) };
    } catch (error) {
      result = {
        ok: false,
        error: error instanceof SendError ? error : SendError.unknown(error instanceof Error ? error.message : String(error)),
      };
    }
    const retryAfter = this.finish(batch, result);
    if (retryAfter !== undefined) void this.attempt(batch, retryAfter);
  }

  /**
   * One transport call, abandoned after `attemptTimeoutMs` (its signal aborted, so that the
   * transport releases its connection and timers); counted in `calls` until it settles.
   */
  private send(request: Uint8Array): Promise<Uint8Array> {
    const controller = new AbortController();
    let call: Promise<Uint8Array>;
    try {
      call = this.transport.call(request, controller.signal);
    } catch (error) {
      call = Promise.reject(error);
    }
    this.calls += 1;
    const settled = () => {
      this.calls -= 1;
      this.checkIdle();
    };
    void call.then(settled, settled);
    const timeout = this.config.attemptTimeoutMs;
    if (timeout === undefined) return call;
    return new Promise((resolve, reject) => {
      const handle = this.scheduler.setTimer(timeout, () => {
        const error = SendError.unknown(`no answer within ${timeout} ms`);
        controller.abort(error);
        reject(error);
      });
      call.then(
        (reply) => {
          this.scheduler.clearTimer(handle);
          resolve(reply);
        },
        (error: unknown) => {
          this.scheduler.clearTimer(handle);
          reject(error);
        },
      );
    });
  }

  /** Settles an attempt; returns the delay before a retry, or undefined when done. */
  private finish(batch: InFlight<Op, O, R>, result: Attempt): number | undefined {
    batch.attempts += 1;
    this.counters.attempts += 1;
    if (batch.attempts > 1) this.counters.retries += 1;
    let refusal: R;
    if (result.ok) {
      let reply;
      try {
        reply = this.codec.decode(result.reply, batch.slots.length);
      } catch (error) {
        this.settle(batch, new BatchError<R>('badReply', `the reply could not be read (the batch may have run): ${String(error)}`));
        return undefined;
      }
      if (reply.kind === 'executed') {
        this.deliver(batch, reply.outcomes, reply.duplicate);
        return undefined;
      }
      refusal = reply.refusal;
    } else if (result.error.kind === 'unknown') {
      batch.possiblyExecuted = true;
      return this.retry(batch, `no answer: ${result.error.message}`);
    } else {
      const code = result.error.code ?? RejectCode.SysFatal;
      const asRefusal = this.codec.refusalOfReject(code, result.error.message);
      if (asRefusal === undefined) {
        const text = `rejected with code ${code}: ${result.error.message}`;
        if (rejectMayHaveRun(code)) batch.possiblyExecuted = true;
        if (rejectIsRetried(code)) return this.retry(batch, text);
        this.settle(batch, new BatchError<R>('rejected', `the batch was rejected, nothing ran: ${text}`, undefined, code));
        return undefined;
      }
      refusal = asRefusal;
    }
    const description = this.codec.describe(refusal);
    if (this.codec.refusalKind(refusal) === 'retry') return this.retry(batch, `refused: ${description}`);
    this.settle(batch, new BatchError<R>('refused', `the batch was refused, nothing ran: ${description}`, refusal));
    return undefined;
  }

  private retry(batch: InFlight<Op, O, R>, error: string): number | undefined {
    const elapsedMs = Number((this.scheduler.nowNs() - batch.key.createdAtTimeNs) / 1_000_000n);
    if (elapsedMs >= this.config.retryForMs) {
      this.settle(
        batch,
        batch.possiblyExecuted
          ? new BatchError<R>('unknown', `unknown whether the batch ran after ${batch.attempts} attempts: ${error}`)
          : new BatchError<R>('rejected', `retries stopped after ${batch.attempts} attempts, nothing ran: ${error}`, undefined, RejectCode.SysTransient),
      );
      return undefined;
    }
    return Math.min(this.config.initialBackoffMs * 2 ** Math.min(batch.attempts - 1, 32), this.config.maxBackoffMs);
  }

  private settle(batch: InFlight<Op, O, R>, error: BatchError<R>): void {
    const certain = error.kind === 'refused' || error.kind === 'rejected';
    const final =
      certain && batch.possiblyExecuted
        ? new BatchError<R>('unknown', `unknown whether the batch ran (it ran at most once): ${error.message}`)
        : error;
    if (final.kind === 'unknown' || final.kind === 'badReply') this.counters.unknown += batch.slots.length;
    else this.counters.refused += batch.slots.length;
    this.release(batch);
    for (const slot of batch.slots) slot.reject(final);
  }

  private deliver(batch: InFlight<Op, O, R>, outcomes: O[], duplicate: boolean): void {
    if (duplicate) this.counters.duplicateReplies += 1;
    const again: Slot<Op, O, R>[] = [];
    batch.slots.forEach((slot, i) => {
      const outcome = outcomes[i] as O;
      if (slot.resubmits < this.config.maxResubmits && this.codec.notExecuted(outcome)) {
        again.push({ ...slot, resubmits: slot.resubmits + 1 });
      } else {
        this.counters.outcomes += 1;
        slot.resolve(outcome);
      }
    });
    if (again.length > 0) {
      // They waited their delay already: sent at once (under a new key), with what is queued,
      // at their place in submission order (before the later ops of their ordering key, which
      // this batch holds until it is released below).
      for (const slot of again) this.queue.push(slot);
      this.counters.resubmitted += again.length;
      this.flushRequested = true;
    }
    this.release(batch);
  }

  /** Frees the batch's place in flight and its ordering keys. */
  private release(batch: InFlight<Op, O, R>): void {
    this.inFlight -= 1;
    this.queue.release(batch.orderingKeys);
    this.pump();
    this.checkIdle();
  }

  private checkIdle(): void {
    if (this.closed && this.queue.length === 0 && this.inFlight === 0 && this.calls === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }
}
