/**
 * The shared idempotency store of a run, on its own throwaway server, and the faults
 * injected into that server.
 */
import { MemoryIdempotencyStore, type IdempotencyStore } from '../../../src/index.js';
import { PostgresIdempotencyStore } from '../../../src/postgres.js';
import { RedisIdempotencyStore } from '../../../src/redis.js';
import { startPostgres, startRedis, type FaultableServer } from '../../helpers/servers.js';

export type StoreKind = 'memory' | 'redis' | 'redis-volatile' | 'postgres';

export const STORE_LABEL: Record<StoreKind, string> = {
  memory: 'memory (one store object shared in-process)',
  redis: 'Redis 7, appendonly yes, appendfsync everysec',
  'redis-volatile': 'Redis 7 without persistence',
  postgres: 'PostgreSQL 15 (fsync off)',
};

export interface Backend {
  /** One store per receiver instance: its own client or pool, one server. */
  stores: IdempotencyStore[];
  server: FaultableServer | undefined;
  close(): Promise<void>;
}

/** Stores with the library's defaults (operation timeouts 2 s for Redis, 5 s for PostgreSQL), as a user gets them. */
export async function startBackend(kind: StoreKind, instances: number): Promise<Backend> {
  if (kind === 'memory') {
    const store = new MemoryIdempotencyStore();
    return {
      stores: Array.from({ length: instances }, () => store),
      server: undefined,
      close: async () => undefined,
    };
  }
  if (kind === 'redis' || kind === 'redis-volatile') {
    const server = await startRedis({ appendOnly: kind === 'redis' });
    const stores = Array.from(
      { length: instances },
      () => new RedisIdempotencyStore({ url: server.url, keyPrefix: 'faults:job:' }),
    );
    return {
      stores,
      server,
      close: async () => {
        await Promise.all(stores.map((s) => s.close()));
        await server.destroy();
      },
    };
  }
  const server = await startPostgres();
  const stores = Array.from(
    { length: instances },
    () => new PostgresIdempotencyStore({ connectionString: server.url, table: 'faults_jobs' }),
  );
  await Promise.all(stores.map((s) => s.migrate()));
  return {
    stores,
    server,
    close: async () => {
      await Promise.all(stores.map((s) => s.close()));
      await server.destroy();
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface FaultTimeline {
  /** Seconds since the start of the load. */
  injectedAt: number;
  restoredAt: number;
}

export interface Fault {
  describe: string;
  inject(server: FaultableServer, at: () => number): Promise<FaultTimeline>;
}

/** SIGSTOP the server's processes for `ms`, then SIGCONT. */
export function pauseFor(ms: number): Fault {
  return {
    describe: `SIGSTOP for ${ms / 1000} s, then SIGCONT`,
    inject: async (server, at) => {
      await server.pause();
      const injectedAt = at();
      await sleep(ms);
      await server.resume();
      return { injectedAt, restoredAt: at() };
    },
  };
}

/** Crash the server (Redis SIGKILL, PostgreSQL stop -m immediate), start it again after `ms` on the same port and data. */
export function crashFor(ms: number, how: string): Fault {
  return {
    describe: `${how}, started again after ${ms / 1000} s on the same port and data`,
    inject: async (server, at) => {
      await server.kill();
      const injectedAt = at();
      await sleep(ms);
      await server.start();
      return { injectedAt, restoredAt: at() };
    },
  };
}
