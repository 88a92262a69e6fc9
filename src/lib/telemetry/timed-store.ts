/**
 * The runner's view of its store when telemetry is on: the same operations, each timed
 * into `jobhook.store.duration` with `op`, `store` and `result` (the reply, or `error`).
 */
import type { IdempotencyStore, StoreTransaction, TransactionalStore } from '../idempotency/types.js';
import type { Telemetry } from './otel.js';

/** A short name for the store in attributes: memory, redis, postgres, or the class name. */
export function storeName(store: IdempotencyStore): string {
  const name = (store as object).constructor?.name ?? 'custom';
  const known: Record<string, string> = { MemoryIdempotencyStore: 'memory', RedisIdempotencyStore: 'redis', PostgresIdempotencyStore: 'postgres' };
  return known[name] ?? name;
}

function resultOf(op: string, value: unknown): string {
  if (op === 'claim') return (value as { status: string }).status;
  if (op === 'release') return value === true ? 'released' : 'not_held';
  if (value === true) return op === 'renew' ? 'renewed' : 'completed';
  if (value === false) return 'superseded';
  return typeof value === 'string' ? value : 'ok';
}

/** `store` with its operations timed, or `store` itself when nothing is recorded. */
export function timedStore(store: IdempotencyStore, telemetry: Telemetry): IdempotencyStore {
  const histogram = telemetry.storeDuration;
  if (histogram === undefined) return store;
  const name = storeName(store);
  const timed = <T>(op: string, run: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const record = (result: string) => histogram.record((performance.now() - started) / 1000, { op, store: name, result });
    return run().then(
      (value) => {
        record(resultOf(op, value));
        return value;
      },
      (err: unknown) => {
        record('error');
        throw err;
      },
    );
  };
  const out: IdempotencyStore & Partial<TransactionalStore> = {
    claim: (jobId, options) => timed('claim', () => store.claim(jobId, options)),
    complete: (jobId, token, options) => timed('complete', () => store.complete(jobId, token, options)),
    release: (jobId, token) => timed('release', () => store.release(jobId, token)),
  };
  if (typeof store.renew === 'function') out.renew = (jobId, token, options) => timed('renew', () => store.renew!(jobId, token, options));
  const tx = store as Partial<TransactionalStore>;
  if (typeof tx.begin === 'function') {
    Object.defineProperty(out, 'transactional', { get: () => tx.transactional, enumerable: true });
    out.begin = async (jobId, token, options): Promise<StoreTransaction> => {
      const t = await timed('begin', () => tx.begin!(jobId, token, options));
      return {
        client: t.client,
        complete: (o) => timed('complete', () => t.complete(o)),
        commit: () => timed('commit', () => t.commit()),
        rollback: () => timed('rollback', () => t.rollback()),
      };
    };
  }
  return out;
}
