/**
 * The transport of a frontend or a Node service: update calls through `@icp-sdk/core`'s agent,
 * which signs the request, sends it, and waits for the certified reply.
 */
import {
  type Agent,
  CertifiedRejectErrorCode,
  HttpErrorCode,
  RejectError,
  TransportError,
  UncertifiedRejectErrorCode,
  UncertifiedRejectUpdateErrorCode,
} from '@icp-sdk/core/agent';
import type { Principal } from '@icp-sdk/core/principal';

import { RejectCode, SendError, type Transport } from './transport.js';

/** Update calls of `methodName` on `canisterId` through `agent` (its identity is the caller). */
export class AgentTransport implements Transport {
  constructor(
    private readonly agent: Agent,
    private readonly canisterId: Principal,
    private readonly methodName = 'execute_batch_packed',
  ) {}

  async call(request: Uint8Array): Promise<Uint8Array> {
    try {
      const { reply } = await this.agent.update(this.canisterId, { methodName: this.methodName, arg: request });
      return new Uint8Array(reply);
    } catch (error) {
      throw sendErrorOf(error);
    }
  }
}

/**
 * What an agent error says about whether the call ran: a reject is `rejected`, an HTTP 4xx was
 * refused before it could run; anything else (a timeout, a network error, a 5xx, a certificate
 * that does not verify) leaves it unknown.
 */
export function sendErrorOf(error: unknown): SendError {
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
