export * from './packed.js';
export * from './codec.js';
export * from './declared.js';
export * from './transport.js';
export * from './batcher.js';
export { AgentTransport, sendErrorOf } from './agent.js';
