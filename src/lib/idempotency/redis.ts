import type { Redis, RedisOptions } from 'ioredis';
import { errorDetails, resolveLogger, type Logger, type LoggerInput } from '../log.js';
import { optionalNumber } from '../options.js';
import { requirePeer } from './peer.js';
import { guarded } from './timeout.js';
import type { JsonObjectValue } from '../event.js';
import {
  checkJobId,
  claimArgs,
  completeArgs,
  deferArgs,
  listArgs,
  releaseArgs,
  renewArgs,
  trackArgs,
  type ClaimOptions,
  type ClaimResult,
  type CompleteOptions,
  type DeferPendingOptions,
  type ListPendingOptions,
  type PendingJob,
  type PendingStore,
  type RenewOptions,
  type TrackPendingOptions,
} from './types.js';

export interface RedisStoreOptions {
  /** An ioredis client you manage (its options are yours), or… */
  client?: Redis;
  /** …a redis:// URL: the store creates a client with short timeouts and closes it in `close()`. */
  url?: string;
  /** Prefix of the keys (default `jobhook:job:`). */
  keyPrefix?: string;
  /**
   * Key of the sorted set of pending jobs (default `jobhook:pending`; its parameters go in
   * `<pendingKey>:params`). Must not start with `keyPrefix`. On Redis Cluster, give both
   * the same hash tag (e.g. `{jobhook}:job:` and `{jobhook}:pending`): completion touches both.
   */
  pendingKey?: string;
  /** Deadline of one store operation before it fails with STORE_UNAVAILABLE (default 2,000 ms). */
  operationTimeoutMs?: number;
  /** Where the persistence warning goes (default: console). */
  log?: LoggerInput;
}

const DONE = 'done';
// Values: 'claim:<token>' while claimed (PX = lease), 'done' once completed (PX = retention).
// One script per operation: atomic, and one round trip.
const CLAIM = `local v = redis.call('GET', KEYS[1])
if not v or v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return {1} end
if v == '${DONE}' then return {2} end
return {3, redis.call('PTTL', KEYS[1])}`;
const RENEW = `local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1`;
// KEYS: job key, pending set, pending parameters; ARGV: owner value, retention, job id.
const COMPLETE = `local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] and v ~= '${DONE}' then return 0 end
redis.call('SET', KEYS[1], '${DONE}', 'PX', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3]) redis.call('HDEL', KEYS[3], ARGV[3]) return 1`;
const TRACK = `redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) else redis.call('HDEL', KEYS[2], ARGV[1]) end return 1`;
const FORGET = `redis.call('ZREM', KEYS[1], ARGV[1]) redis.call('HDEL', KEYS[2], ARGV[1]) return 1`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0`;

interface ScriptedRedis extends Redis {
  jobhookClaim(key: string, value: string, leaseMs: number): Promise<[number, number?]>;
  jobhookRenew(key: string, value: string, leaseMs: number): Promise<number>;
  jobhookComplete(key: string, pendingKey: string, paramsKey: string, value: string, retainMs: number, jobId: string): Promise<number>;
  jobhookTrack(pendingKey: string, paramsKey: string, jobId: string, since: number, params: string): Promise<number>;
  jobhookForget(pendingKey: string, paramsKey: string, jobId: string): Promise<number>;
  jobhookRelease(key: string, value: string): Promise<number>;
}

/**
 * Idempotency store on Redis: one Lua script per operation (claim, renew, complete,
 * release), token-checked. Several receiver instances share it. Its guarantee needs
 * persistence: a Redis restarted without AOF forgets completed jobs, so their
 * redeliveries run the handler again (the store warns at first use when AOF is off).
 * PostgreSQL is the durable choice.
 *
 * @example
 * ```ts
 * import { RedisIdempotencyStore } from 'jobhook/redis';
 * import { createReceiver } from 'jobhook/express';
 *
 * const store = new RedisIdempotencyStore({ url: process.env.REDIS_URL! }); // or { client: yourIoredisClient }
 * app.post('/webhooks/gateway', createReceiver({ publicKey, store, onEvent }));
 * process.on('SIGTERM', () => void store.close());
 * ```
 */
export class RedisIdempotencyStore implements PendingStore {
  private readonly client: ScriptedRedis;
  private readonly owned: boolean;
  private readonly prefix: string;
  private readonly pendingKey: string;
  private readonly paramsKey: string;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private persistenceChecked = false;

  constructor(options: RedisStoreOptions) {
    if ((options?.client === undefined) === (options?.url === undefined)) throw new TypeError('RedisIdempotencyStore needs exactly one of client or url');
    this.prefix = options.keyPrefix ?? 'jobhook:job:';
    if (typeof this.prefix !== 'string') throw new TypeError('keyPrefix must be a string');
    this.pendingKey = options.pendingKey ?? 'jobhook:pending';
    this.paramsKey = `${this.pendingKey}:params`;
    if (typeof this.pendingKey !== 'string' || this.pendingKey.startsWith(this.prefix) || this.paramsKey.startsWith(this.prefix)) {
      throw new TypeError(`pendingKey must be a string such that neither it nor ${JSON.stringify(`${String(options.pendingKey)}:params`)} starts with keyPrefix (${JSON.stringify(this.prefix)}), or a job id could name it`);
    }
    this.timeoutMs = optionalNumber(options.operationTimeoutMs, 'operationTimeoutMs', 2000);
    this.log = resolveLogger(options.log);
    this.owned = options.client === undefined;
    this.client = scripted(options.client ?? this.connect(options.url!));
  }

  private connect(url: string): Redis {
    const { Redis: Client } = requirePeer<typeof import('ioredis')>('ioredis', 'RedisIdempotencyStore');
    const options: RedisOptions = {
      connectTimeout: this.timeoutMs,
      commandTimeout: this.timeoutMs,
      maxRetriesPerRequest: 1,
      retryStrategy: (times) => Math.min(times * 200, 2000),
    };
    const client = new Client(url, options);
    client.on('error', () => undefined); // reported per operation; ioredis reconnects by itself
    return client;
  }

  private run<T>(operation: string, fn: (client: ScriptedRedis) => Promise<T>): Promise<T> {
    if (!this.persistenceChecked) {
      this.persistenceChecked = true;
      void this.checkPersistence();
    }
    return guarded('Redis', operation, this.timeoutMs, () => fn(this.client));
  }

  /**
   * Warns once when the server keeps no append-only file: completed marks would not
   * survive a restart. Managed services that refuse CONFIG are asked through INFO.
   */
  private async checkPersistence(): Promise<void> {
    try {
      let aof: boolean;
      try {
        const [, appendonly] = (await this.client.config('GET', 'appendonly')) as [string, string];
        aof = appendonly === 'yes';
      } catch {
        aof = /aof_enabled:1/.test(await this.client.info('persistence'));
      }
      if (!aof) {
        this.log.warn(
          'jobhook: this Redis keeps no append-only file (appendonly no): a restart forgets completed jobs, and their redeliveries run the handler again. Set appendonly yes (appendfsync everysec), or use the PostgreSQL store.',
        );
      }
    } catch (err) {
      this.persistenceChecked = false; // try again with the next operation
      this.log.debug('jobhook: could not read the Redis persistence settings', errorDetails(err));
    }
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const { leaseMs, token } = claimArgs(jobId, options);
    const key = this.prefix + jobId;
    return this.run('claim', async (redis) => {
      const [state, ttl] = await redis.jobhookClaim(key, `claim:${token}`, leaseMs);
      if (state === 1) return { status: 'acquired', token };
      if (state === 2) return { status: 'completed' };
      return { status: 'in_progress', retryAfterMs: Math.max(1, Number(ttl)) };
    });
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<boolean> {
    const { leaseMs } = renewArgs(jobId, token, options);
    const key = this.prefix + jobId;
    return this.run('renew', async (redis) => (await redis.jobhookRenew(key, `claim:${token}`, leaseMs)) === 1);
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<boolean> {
    const { retainMs } = completeArgs(jobId, token, options);
    const key = this.prefix + jobId;
    return this.run('complete', async (redis) => (await redis.jobhookComplete(key, this.pendingKey, this.paramsKey, `claim:${token}`, retainMs, jobId)) === 1);
  }

  async release(jobId: string, token: string): Promise<boolean> {
    releaseArgs(jobId, token);
    const key = this.prefix + jobId;
    return this.run('release', async (redis) => (await redis.jobhookRelease(key, `claim:${token}`)) === 1);
  }

  async trackPending(jobId: string, options: TrackPendingOptions = {}): Promise<void> {
    const { since, userParameters: params } = trackArgs(jobId, options);
    await this.run('trackPending', (redis) => redis.jobhookTrack(this.pendingKey, this.paramsKey, jobId, since, params === undefined ? '' : JSON.stringify(params)));
  }

  async listPending(options: ListPendingOptions): Promise<PendingJob[]> {
    const { before, limit } = listArgs(options);
    return this.run('listPending', async (redis) => {
      const flat = await redis.zrangebyscore(this.pendingKey, '-inf', before, 'WITHSCORES', 'LIMIT', 0, limit);
      const ids = flat.filter((_, k) => k % 2 === 0);
      const params = ids.length === 0 ? [] : await redis.hmget(this.paramsKey, ...ids);
      return ids.map((jobId, k) => {
        const json = params[k];
        return { jobId, since: Number(flat[2 * k + 1]), ...(json ? { userParameters: JSON.parse(json) as JsonObjectValue } : {}) };
      });
    });
  }

  async forgetPending(jobId: string): Promise<void> {
    checkJobId(jobId);
    await this.run('forgetPending', (redis) => redis.jobhookForget(this.pendingKey, this.paramsKey, jobId));
  }

  async deferPending(jobId: string, options: DeferPendingOptions): Promise<void> {
    const { since } = deferArgs(jobId, options);
    // XX: only a job still pending moves; a completed one stays gone.
    await this.run('deferPending', (redis) => redis.zadd(this.pendingKey, 'XX', since, jobId));
  }

  /** Closes the client if the store created it (from `url`); a client you passed is left to you. */
  async close(): Promise<void> {
    if (!this.owned) return;
    await this.client.quit().catch(() => this.client.disconnect());
  }
}

function scripted(client: Redis): ScriptedRedis {
  const c = client as ScriptedRedis;
  // defineCommand sends EVALSHA and falls back to EVAL after a server restart (NOSCRIPT).
  if (typeof c.jobhookClaim !== 'function') client.defineCommand('jobhookClaim', { numberOfKeys: 1, lua: CLAIM });
  if (typeof c.jobhookRenew !== 'function') client.defineCommand('jobhookRenew', { numberOfKeys: 1, lua: RENEW });
  if (typeof c.jobhookComplete !== 'function') client.defineCommand('jobhookComplete', { numberOfKeys: 3, lua: COMPLETE });
  if (typeof c.jobhookTrack !== 'function') client.defineCommand('jobhookTrack', { numberOfKeys: 2, lua: TRACK });
  if (typeof c.jobhookForget !== 'function') client.defineCommand('jobhookForget', { numberOfKeys: 2, lua: FORGET });
  if (typeof c.jobhookRelease !== 'function') client.defineCommand('jobhookRelease', { numberOfKeys: 1, lua: RELEASE });
  return c;
}
