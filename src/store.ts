/**
 * The idempotency store contract, for writing a store of your own (the same contract
 * suite holds jobhook's memory, Redis and PostgreSQL stores to it), and the memory store.
 * Runtime-neutral.
 * @packageDocumentation
 */
export { MemoryIdempotencyStore, type MemoryStoreOptions } from './lib/jobs/memory-store.js';
export type {
  ClaimOptions,
  ClaimResult,
  CompleteOptions,
  CompleteReply,
  DeferPendingOptions,
  IdempotencyStore,
  ListPendingOptions,
  PendingJob,
  ReleaseOptions,
  RenewOptions,
  RenewReply,
  StoreTransaction,
  TrackPendingOptions,
  TransactionalStore,
  TransactionOf,
} from './lib/jobs/store.js';
export type {
  ClaimContext,
  ErrorListener,
  ResolvedRunnerOptions,
  RunnerHealth,
  RunOptions,
} from './lib/jobs/runner.js';
