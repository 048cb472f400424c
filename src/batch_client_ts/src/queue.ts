/**
 * The batcher's queue (internal to the package): ops in submission order, except that the ops
 * of an ordering key whose batch is in flight wait until that batch is settled.
 */

/** What the queue needs of an op. */
export interface Queued {
  len: number;
  submittedNs: bigint;
  /** Its place in submission order (kept when the op is queued again). */
  seq: number;
  orderingKey: string | undefined;
}

interface KeyState<S> {
  /** Its queued ops, parked or not, and their bytes. */
  queued: number;
  queuedBytes: number;
  inFlight: boolean;
  /** Its queued ops taken out of the order while a batch of the key is in flight. */
  parked: S[];
}

/**
 * Ops in submission order, with per ordering key the count of its queued ops and whether a
 * batch holding some of them is in flight. An op whose key has a batch in flight is parked
 * when it reaches the front, and put back in order when the batch is settled. New ops join a
 * FIFO; ops queued again (not executed, or unparked) a min-heap on `seq`, and the front is the
 * lower of the two: without ops queued again, a FIFO's cost.
 */
export class OrderedQueue<S extends Queued> {
  /** New ops, in submission order, from `head` on. */
  private fifo: S[] = [];
  private head = 0;
  /** Ops queued again. */
  private readonly heap: S[] = [];
  private readonly keys = new Map<string, KeyState<S>>();
  /** Every queued op, parked or not, and their bytes. */
  length = 0;
  bytes = 0;
  /** Of them, the ops whose key has a batch in flight, and their bytes. */
  private blocked = 0;
  private blockedBytes = 0;

  /** The ops that may leave in the next batch, and their bytes. */
  eligible(): { ops: number; bytes: number } {
    return { ops: this.length - this.blocked, bytes: this.bytes - this.blockedBytes };
  }

  /** Queues `slot` at its place in submission order. */
  push(slot: S): void {
    this.length += 1;
    this.bytes += slot.len;
    if (slot.orderingKey !== undefined) {
      let key = this.keys.get(slot.orderingKey);
      if (key === undefined) {
        key = { queued: 0, queuedBytes: 0, inFlight: false, parked: [] };
        this.keys.set(slot.orderingKey, key);
      }
      key.queued += 1;
      key.queuedBytes += slot.len;
      if (key.inFlight) {
        this.blocked += 1;
        this.blockedBytes += slot.len;
      }
    }
    const last = this.fifo[this.fifo.length - 1];
    if (this.head === this.fifo.length || last!.seq < slot.seq) this.fifo.push(slot);
    else this.heapPush(slot);
  }

  /** Whether the first op by submission order is in the heap of ops queued again. */
  private firstIsAgain(): boolean {
    const again = this.heap[0];
    const next = this.fifo[this.head];
    return again !== undefined && (next === undefined || again.seq < next.seq);
  }

  private first(): S | undefined {
    return this.firstIsAgain() ? this.heap[0] : this.fifo[this.head];
  }

  private takeFirst(): S {
    if (this.firstIsAgain()) return this.heapPop()!;
    const slot = this.fifo[this.head]!;
    this.head += 1;
    if (this.head === this.fifo.length) {
      this.fifo = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.fifo.length) {
      this.fifo = this.fifo.slice(this.head);
      this.head = 0;
    }
    return slot;
  }

  /** The first op that may leave now; the ops before it whose key has a batch in flight are parked. */
  front(): S | undefined {
    for (;;) {
      const top = this.first();
      const key = top?.orderingKey === undefined ? undefined : this.keys.get(top.orderingKey);
      if (top === undefined || key === undefined || !key.inFlight) return top;
      key.parked.push(this.takeFirst());
    }
  }

  /** Takes the op {@link front} returned. */
  popFront(): S {
    const slot = this.takeFirst();
    this.length -= 1;
    this.bytes -= slot.len;
    const key = slot.orderingKey === undefined ? undefined : this.keys.get(slot.orderingKey);
    if (key !== undefined) {
      key.queued -= 1;
      key.queuedBytes -= slot.len;
    }
    return slot;
  }

  /** A batch holding ops of `keys` is in flight: their queued ops wait. */
  hold(keys: readonly string[]): void {
    for (const name of keys) {
      let key = this.keys.get(name);
      if (key === undefined) {
        key = { queued: 0, queuedBytes: 0, inFlight: false, parked: [] };
        this.keys.set(name, key);
      }
      key.inFlight = true;
      this.blocked += key.queued;
      this.blockedBytes += key.queuedBytes;
    }
  }

  /** The batch holding `keys` is settled: their queued ops may leave again, in their order. */
  release(keys: readonly string[]): void {
    for (const name of keys) {
      const key = this.keys.get(name);
      if (key === undefined) continue;
      key.inFlight = false;
      this.blocked -= key.queued;
      this.blockedBytes -= key.queuedBytes;
      if (key.queued === 0) this.keys.delete(name);
      for (const slot of key.parked.splice(0)) this.heapPush(slot);
    }
  }

  private heapPush(slot: S): void {
    const h = this.heap;
    let i = h.push(slot) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.seq <= slot.seq) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = slot;
  }

  private heapPop(): S | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= h.length) break;
      const right = left + 1;
      const child = right < h.length && h[right]!.seq < h[left]!.seq ? right : left;
      if (h[child]!.seq >= last.seq) break;
      h[i] = h[child]!;
      i = child;
    }
    h[i] = last;
    return top;
  }
}
