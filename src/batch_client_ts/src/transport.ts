/** How a batch reaches the canister. */

/** The reject codes of the Internet Computer's interface specification. */
export enum RejectCode {
  SysFatal = 1,
  SysTransient = 2,
  DestinationInvalid = 3,
  CanisterReject = 4,
  CanisterError = 5,
  SysUnknown = 6,
}

/**
 * Whether the batcher sends a batch rejected with `code` again, with the same request and
 * key: `SysTransient` and `CanisterError` (stopped, trapped, out of cycles: nothing ran, a
 * later attempt may succeed) and `SysUnknown` (the call may have run: the retry is answered
 * from the canister's record if it did). Any other code is final.
 */
export function rejectIsRetried(code: RejectCode): boolean {
  return code === RejectCode.SysTransient || code === RejectCode.CanisterError || code === RejectCode.SysUnknown;
}

/** Whether a call rejected with `code` may have run: `SysUnknown`; any other reject of a batch method changed nothing. */
export function rejectMayHaveRun(code: RejectCode): boolean {
  return code === RejectCode.SysUnknown;
}

/**
 * Why an attempt got no reply: `unknown` (a timeout, a lost connection: the call may have run)
 * or `rejected` (the system or the canister rejected it; except `SysUnknown`, nothing ran).
 */
export class SendError extends Error {
  private constructor(
    readonly kind: 'unknown' | 'rejected',
    message: string,
    readonly code?: RejectCode,
  ) {
    super(message);
    this.name = 'SendError';
  }

  /** No answer: the call may or may not have run. */
  static unknown(message: string): SendError {
    return new SendError('unknown', message);
  }

  /** Rejected with `code`. */
  static rejected(code: RejectCode, message: string): SendError {
    return new SendError('rejected', message, code);
  }
}

/**
 * Sends one request (the Candid argument of the batch method) once and resolves to the reply
 * bytes, or rejects with a {@link SendError}. The batcher decides whether to retry; a retry
 * sends the same bytes, with the same batch key.
 *
 * `signal` aborts when the batcher abandons the attempt (no answer within `attemptTimeoutMs`;
 * it sends the batch again): the call then releases what it holds (its connection, its
 * polling timers) and settles soon. `Batcher.close()` resolves only once every call it made
 * has settled, so that it leaves no timer or socket behind.
 */
export interface Transport {
  call(request: Uint8Array, signal: AbortSignal): Promise<Uint8Array>;
}
