import type { Agent } from '@icp-sdk/core/agent';
import { Principal } from '@icp-sdk/core/principal';

import { AgentTransport, BatchError, Batcher, type DeclaredRefusal, DeclaredWrites, InvalidOpError, type Outcome } from '../src/index.js';

/** The todo store's writes, as its declaration names them (optional: it lets tsc check ops too). */
export type TodoOp =
  | { write: 'add'; params: { title: string; due_ns: bigint | null } }
  | { write: 'complete'; params: { id: bigint } };

export type TodoBatcher = Batcher<TodoOp, Outcome, DeclaredRefusal>;

/** One batcher per page: the canister's declaration is all the client needs to know of it. */
export async function connect(agent: Agent, canisterId: string): Promise<TodoBatcher> {
  const writes = await DeclaredWrites.fetch<TodoOp>(agent, canisterId);
  return new Batcher(writes, new AgentTransport(agent, Principal.fromText(canisterId), 'execute_writes_packed'));
}

/** Adds a todo and resolves to its id once its batch committed. */
export async function addTodo(batcher: TodoBatcher, title: string, dueNs: bigint | null = null): Promise<bigint> {
  try {
    const outcome = await batcher.submit({ write: 'add', params: { title, due_ns: dueNs } });
    if ('Failed' in outcome) throw new Error(`not added: ${outcome.Failed.message}`);
    if ('NotExecuted' in outcome) throw new Error('not added: its batches ran out of instructions before it, each time');
    return outcome.Committed.last_insert_rowid;
  } catch (error) {
    if (error instanceof InvalidOpError) {
      // Checked against the declaration before anything was sent: error.write, error.param, error.reason.
    } else if (error instanceof BatchError && error.refusal?.name === 'DeclarationMismatch') {
      // The canister was upgraded and its writes changed: connect again to fetch its declaration.
    }
    throw error;
  }
}
