/**
 * The runner's view of its store when telemetry is on: the same operations, each timed
 * into `jobhook.store.duration` with `op`, `store` and `result` (the reply, or `error`).
 */
import type { IdempotencyStore, StoreTransaction, TransactionalStore } from './store.js';
import { AttributeSets, type Telemetry } from '../runtime/telemetry.js';

/** A short name for the store in attributes: memory, redis, postgres, sqlite, or the class name. */
export function storeName(store: IdempotencyStore): string {
  const name = (store as object).constructor?.name ?? 'custom';
  const known: Record<string, string> = {
    MemoryIdempotencyStore: 'memory',
    RedisIdempotencyStore: 'redis',
    PostgresIdempotencyStore: 'postgres',
    SqliteIdempotencyStore: 'sqlite',
  };
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
  // One frozen { op, store, result } per combination, reused by every record.
  const sets = new AttributeSets((op, result) => ({ op, store: name, result: result! }));
  /**
   * Records the duration of the operation `op` begun at `started` (performance.now(), taken
   * before the call: arguments are evaluated in order) when `pending` settles. No closure per
   * call; a store method that throws synchronously throws as it would unwrapped.
   */
  const timed = <T>(op: string, started: number, pending: Promise<T>): Promise<T> =>
    pending.then(
      (value) => {
        histogram.record((performance.now() - started) / 1000, sets.get(op, resultOf(op, value)));
        return value;
      },
      (err: unknown) => {
        histogram.record((performance.now() - started) / 1000, sets.get(op, 'error'));
        throw err;
      },
    );
  const out: IdempotencyStore & Partial<TransactionalStore> = {
    claim: (jobId, options) => timed('claim', performance.now(), store.claim(jobId, options)),
    complete: (jobId, token, options) =>
      timed('complete', performance.now(), store.complete(jobId, token, options)),
    release: (jobId, token, options) =>
      timed(
        'release',
        performance.now(),
        options === undefined ? store.release(jobId, token) : store.release(jobId, token, options),
      ),
  };
  if (typeof store.renew === 'function')
    out.renew = (jobId, token, options) =>
      timed('renew', performance.now(), store.renew!(jobId, token, options));
  const tx = store as Partial<TransactionalStore>;
  if (typeof tx.begin === 'function') {
    Object.defineProperty(out, 'transactional', { get: () => tx.transactional, enumerable: true });
    out.begin = async (jobId, token, options): Promise<StoreTransaction> => {
      const t = await timed('begin', performance.now(), tx.begin!(jobId, token, options));
      return {
        client: t.client,
        complete: (o) => timed('complete', performance.now(), t.complete(o)),
        commit: () => timed('commit', performance.now(), t.commit()),
        rollback: () => timed('rollback', performance.now(), t.rollback()),
        ...(typeof t.keepAlive === 'function' ? { keepAlive: () => t.keepAlive!() } : {}),
      };
    };
  }
  return out;
}
