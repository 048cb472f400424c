export * from './types.js';
export * from './codec.js';
export * from './retry.js';
export * from './declared.js';
export * from './transport.js';
export * from './batcher.js';
export { AgentTransport, sendErrorOf } from './agent.js';
export { PackedError } from './wire.js';
