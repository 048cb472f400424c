/**
 * The transport of a frontend or a Node service: update calls through `@icp-sdk/core`'s agent,
 * which signs the request, sends it, and waits for the certified reply.
 */
import {
  type Agent,
  CertifiedRejectErrorCode,
  type HttpAgentRequest,
  HttpErrorCode,
  type PollStrategy,
  RejectError,
  TransportError,
  UncertifiedRejectErrorCode,
  UncertifiedRejectUpdateErrorCode,
} from '@icp-sdk/core/agent';
import type { Principal } from '@icp-sdk/core/principal';

import { RejectCode, SendError, type Transport } from './transport.js';

/** The signal of each call in flight, by its argument (every call sends its own copy). */
const signals = new WeakMap<Uint8Array, AbortSignal>();
/** The agents that hand a call's signal to its HTTP request. */
const passing = new WeakSet<object>();

/**
 * Lets the signal of a call abort its HTTP request: an update transform (the agent's own
 * extension point, run on every call before it is signed) sets `signal` on the request of a
 * call whose argument is in `signals`, and leaves other calls as they are. An agent without
 * transforms (not an `HttpAgent`) gets its polling stopped only.
 */
function passSignals(agent: Agent): void {
  const withTransforms = agent as Agent & { addTransform?: (type: 'update', fn: (r: HttpAgentRequest) => Promise<void>) => void };
  if (passing.has(agent) || typeof withTransforms.addTransform !== 'function') return;
  withTransforms.addTransform('update', async (request) => {
    const signal = 'arg' in request.body ? signals.get(request.body.arg) : undefined;
    if (signal !== undefined) request.request = { ...request.request, signal };
  });
  passing.add(agent);
}

/** The agent's default polling (2 s, then 1 s growing 1.2× per poll, for 5 minutes), ended by `signal`. */
function pollingUntil(signal: AbortSignal): PollStrategy {
  const started = Date.now();
  let wait = 2_000;
  return () =>
    new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason as Error);
      if (Date.now() - started > 5 * 60_000) return reject(SendError.unknown('no reply after 5 minutes of polling'));
      const abort = () => {
        clearTimeout(timer);
        reject(signal.reason as Error);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', abort);
        resolve();
      }, wait);
      signal.addEventListener('abort', abort, { once: true });
      wait = wait === 2_000 ? 1_200 : wait * 1.2;
    });
}

/**
 * Update calls of `methodName` on `canisterId` through `agent` (its identity is the caller).
 *
 * An attempt the batcher abandons (its signal aborted) ends its HTTP request at once (through
 * an update transform this transport adds to an `HttpAgent`, once; other calls of the agent
 * are left as they are) and its polling; the call settles once the agent gives up on it (an
 * `HttpAgent` retries a failed request `retryTimes` times, 3 by default: 2 to 5 s of backoff,
 * each retry failing at once).
 */
export class AgentTransport implements Transport {
  constructor(
    private readonly agent: Agent,
    private readonly canisterId: Principal,
    private readonly methodName = 'execute_batch_packed',
  ) {
    passSignals(agent);
  }

  async call(request: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    // Its own copy: the transform finds the call's signal by its argument.
    const arg = request.slice();
    if (signal !== undefined) signals.set(arg, signal);
    try {
      const polling = signal === undefined ? {} : { strategy: pollingUntil(signal) };
      const { reply } = await this.agent.update(this.canisterId, { methodName: this.methodName, arg }, polling);
      return new Uint8Array(reply);
    } catch (error) {
      throw sendErrorOf(error);
    } finally {
      signals.delete(arg);
    }
  }
}

/**
 * What an agent error says about whether the call ran: a reject is `rejected`, an HTTP 4xx was
 * refused before it could run; anything else (a timeout, a network error, a 5xx, a certificate
 * that does not verify) leaves it unknown.
 */
export function sendErrorOf(error: unknown): SendError {
  if (error instanceof SendError) return error;
  if (error instanceof RejectError) {
    const code = error.code;
    if (
      code instanceof CertifiedRejectErrorCode ||
      code instanceof UncertifiedRejectErrorCode ||
      code instanceof UncertifiedRejectUpdateErrorCode
    ) {
      return SendError.rejected(code.rejectCode as number as RejectCode, code.rejectMessage);
    }
  }
  if (error instanceof TransportError) {
    const code = error.code;
    if (code instanceof HttpErrorCode && code.status >= 400 && code.status < 500) {
      return SendError.rejected(RejectCode.SysFatal, `HTTP ${code.status}: ${code.bodyText ?? code.statusText}`);
    }
  }
  return SendError.unknown(error instanceof Error ? error.message : String(error));
}
