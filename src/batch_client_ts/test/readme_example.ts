import { HttpAgent } from '@icp-sdk/core/agent';
import { Principal } from '@icp-sdk/core/principal';

import { AgentTransport, BatchError, Batcher, type Outcome, type PackedRefusal, PackedUserOrders, type UserOrderOp } from '../src/index.js';

export type OrderBatcher = Batcher<UserOrderOp, Outcome, PackedRefusal>;

/** One batcher per page: the user's writes leave in batches, one update call per batch. */
export async function connect(host: string, canisterId: string): Promise<OrderBatcher> {
  // A local replica serves its own root key; the IC's is built into the agent.
  const agent = await HttpAgent.create({ host, shouldFetchRootKey: host.startsWith('http://') });
  return new Batcher(new PackedUserOrders(), new AgentTransport(agent, Principal.fromText(canisterId)));
}

/** Places an order and resolves to its id once its batch committed. */
export async function placeOrder(batcher: OrderBatcher, userId: bigint, amount: number): Promise<bigint> {
  try {
    const outcome = await batcher.submit({ CreateOrder: { user_id: userId, amount } });
    if ('Failed' in outcome) throw new Error(`the order failed: ${outcome.Failed.message}`);
    return outcome.Committed.last_insert_rowid;
  } catch (error) {
    if (error instanceof BatchError && error.kind === 'unknown') {
      // No answer before the retry window closed: the order ran at most once. Ask the canister.
    }
    throw error;
  }
}
