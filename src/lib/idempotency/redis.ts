import type { Redis, RedisOptions } from 'ioredis';
import { guarded } from './timeout.js';
import { checkJobId, checkPositive, newToken, type ClaimOptions, type ClaimResult, type CompleteOptions, type IdempotencyStore } from './types.js';

export interface RedisStoreOptions {
  /** An ioredis client you manage (its options are yours), or… */
  client?: Redis;
  /** …a redis:// URL: the store creates a client with short timeouts and closes it in `close()`. */
  url?: string;
  /** Prefix of the keys (default `jobhook:job:`). */
  keyPrefix?: string;
  /** Deadline of one store operation before it fails with STORE_UNAVAILABLE (default 2,000 ms). */
  operationTimeoutMs?: number;
}

const DONE = 'done';
// Values: 'claim:<token>' while claimed (PX = lease), 'done' once completed (PX = retention).
const STATUS = `local v = redis.call('GET', KEYS[1]) if not v then return nil end return {v, redis.call('PTTL', KEYS[1])}`;
const COMPLETE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], '${DONE}', 'PX', ARGV[2]) return 1 end return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0`;

interface ScriptedRedis extends Redis {
  jobhookStatus(key: string): Promise<[string, number] | null>;
  jobhookComplete(key: string, value: string, retainMs: number): Promise<number>;
  jobhookRelease(key: string, value: string): Promise<number>;
}

async function loadRedisClass(): Promise<typeof import('ioredis').Redis> {
  try {
    return (await import('ioredis')).Redis;
  } catch {
    throw new TypeError('RedisIdempotencyStore needs the optional peer dependency ioredis: npm install ioredis');
  }
}

/**
 * Idempotency store on Redis: `SET NX PX` claims, Lua compare-and-set for
 * token-checked complete and release. Several receiver instances share it.
 *
 * @example
 * ```ts
 * import { RedisIdempotencyStore } from 'jobhook/redis';
 * import { webhookReceiver } from 'jobhook/express';
 *
 * const store = new RedisIdempotencyStore({ url: process.env.REDIS_URL! }); // or { client: yourIoredisClient }
 * app.post('/webhooks/gateway', webhookReceiver({ publicKey, store, onEvent }));
 * process.on('SIGTERM', () => void store.close());
 * ```
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  private client: Promise<ScriptedRedis>;
  private readonly owned: boolean;
  private readonly prefix: string;
  private readonly timeoutMs: number;

  constructor(options: RedisStoreOptions) {
    if ((options?.client === undefined) === (options?.url === undefined)) throw new TypeError('RedisIdempotencyStore needs exactly one of client or url');
    this.prefix = options.keyPrefix ?? 'jobhook:job:';
    if (typeof this.prefix !== 'string') throw new TypeError('keyPrefix must be a string');
    this.timeoutMs = options.operationTimeoutMs === undefined ? 2000 : checkPositive(options.operationTimeoutMs, 'operationTimeoutMs');
    this.owned = options.client === undefined;
    this.client = options.client !== undefined ? Promise.resolve(scripted(options.client)) : this.connect(options.url!);
    // Failures surface on first use as STORE_UNAVAILABLE, not as an unhandled rejection.
    this.client.catch(() => undefined);
  }

  private async connect(url: string): Promise<ScriptedRedis> {
    const Client = await loadRedisClass();
    const options: RedisOptions = {
      connectTimeout: this.timeoutMs,
      commandTimeout: this.timeoutMs,
      maxRetriesPerRequest: 1,
      retryStrategy: (times) => Math.min(times * 200, 2000),
    };
    const client = new Client(url, options);
    client.on('error', () => undefined); // reported per operation; ioredis reconnects by itself
    return scripted(client);
  }

  private run<T>(operation: string, fn: (client: ScriptedRedis) => Promise<T>): Promise<T> {
    return guarded('Redis', operation, this.timeoutMs, async () => fn(await this.client));
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const key = this.prefix + checkJobId(jobId);
    const leaseMs = checkPositive(options?.leaseMs, 'leaseMs');
    return this.run('claim', async (redis) => {
      // A key can expire between SET NX and the status read: try again then.
      for (let attempt = 0; attempt < 3; attempt++) {
        const token = newToken();
        if ((await redis.set(key, `claim:${token}`, 'PX', leaseMs, 'NX')) === 'OK') return { status: 'acquired', token };
        const status = await redis.jobhookStatus(key);
        if (status === null) continue;
        if (status[0] === DONE) return { status: 'completed' };
        return { status: 'in_progress', retryAfterMs: Math.max(1, Number(status[1])) };
      }
      return { status: 'in_progress' };
    });
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<boolean> {
    const key = this.prefix + checkJobId(jobId);
    const retainMs = checkPositive(options?.retainMs, 'retainMs');
    return this.run('complete', async (redis) => (await redis.jobhookComplete(key, `claim:${token}`, retainMs)) === 1);
  }

  async release(jobId: string, token: string): Promise<boolean> {
    const key = this.prefix + checkJobId(jobId);
    return this.run('release', async (redis) => (await redis.jobhookRelease(key, `claim:${token}`)) === 1);
  }

  /** Closes the client if the store created it (from `url`); a client you passed is left to you. */
  async close(): Promise<void> {
    if (!this.owned) return;
    const client = await this.client.catch(() => undefined);
    if (client !== undefined) await client.quit().catch(() => client.disconnect());
  }
}

function scripted(client: Redis): ScriptedRedis {
  const c = client as ScriptedRedis;
  // defineCommand sends EVALSHA and falls back to EVAL after a server restart (NOSCRIPT).
  if (typeof c.jobhookStatus !== 'function') client.defineCommand('jobhookStatus', { numberOfKeys: 1, lua: STATUS });
  if (typeof c.jobhookComplete !== 'function') client.defineCommand('jobhookComplete', { numberOfKeys: 1, lua: COMPLETE });
  if (typeof c.jobhookRelease !== 'function') client.defineCommand('jobhookRelease', { numberOfKeys: 1, lua: RELEASE });
  return c;
}
