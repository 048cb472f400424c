/**
 * The reference canister's keyed packed batch as a {@link BatchCodec}: its users/orders ops
 * (`./packed.ts`) sent as the Candid `blob` argument of `execute_batch_packed`, answered with a
 * `PackedResult` (`variant { Ok : blob; Err : WriteError }`). A test codec, not part of the
 * package: the batcher's simulated canister and the reference canister's end-to-end tests
 * speak it.
 */
import { IDL } from '@icp-sdk/core/candid';

import {
  BLOB,
  type BatchCodec,
  CANDID_BLOB_FRAMING,
  type RefusalKind,
  type Reply,
  WRITE_ERROR,
  type WriteError,
  type WriteRefusal,
  isNotExecuted,
  refusalKindOfWriteError,
  refusalOf,
} from '../../src/codec.js';
import type { RejectCode } from '../../src/transport.js';
import { type BatchKey, KEYED_HEADER_BYTES, type Outcome, type UserOrderOp, decodeKeyedOutcomes, encodeKeyedOps, opLen } from './packed.js';

/** `execute_batch_packed`'s reply: `variant { Ok : blob; Err : WriteError }`. */
export const PACKED_RESULT = IDL.Variant({ Ok: BLOB, Err: WRITE_ERROR });

/** The reference canister's keyed packed batch (request version 2, reply version 3). */
export class PackedUserOrders implements BatchCodec<UserOrderOp, Outcome, WriteRefusal> {
  readonly headerLen = CANDID_BLOB_FRAMING + KEYED_HEADER_BYTES;

  opLen(op: UserOrderOp): number {
    return opLen(op);
  }

  encode(key: BatchKey, ops: readonly UserOrderOp[]): Uint8Array {
    return new Uint8Array(IDL.encode([BLOB], [encodeKeyedOps(key, ops)]));
  }

  decode(reply: Uint8Array, ops: number): Reply<Outcome, WriteRefusal> {
    const [result] = IDL.decode([PACKED_RESULT], reply) as [{ Ok: Uint8Array | number[] } | { Err: WriteError }];
    if ('Err' in result) return { kind: 'refused', refusal: refusalOf(result.Err) };
    const blob = result.Ok;
    const decoded = decodeKeyedOutcomes(blob instanceof Uint8Array ? blob : Uint8Array.from(blob), ops);
    if (decoded.outcomes.length !== ops) {
      throw new Error(`${decoded.outcomes.length} outcomes for a batch of ${ops} ops`);
    }
    return { kind: 'executed', outcomes: decoded.outcomes, duplicate: decoded.duplicate };
  }

  /** Never: the canister refuses with a typed `Err`, not with a reject. */
  refusalOfReject(_code: RejectCode, _message: string): WriteRefusal | undefined {
    return undefined;
  }

  refusalKind(refusal: WriteRefusal): RefusalKind {
    return refusalKindOfWriteError(refusal.error);
  }

  notExecuted(outcome: Outcome): boolean {
    return isNotExecuted(outcome);
  }

  describe(refusal: WriteRefusal): string {
    return refusal.detail === '' ? refusal.name : `${refusal.name}: ${refusal.detail}`;
  }
}
