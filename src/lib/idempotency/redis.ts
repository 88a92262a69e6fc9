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
  LAPSED_CLAIM_KEEP_MS,
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
// Values: 'claim:<token>:<lease end ms>[:<stale since ms>]' while claimed, 'done' once
// completed (PX = retention). A claim's key outlives its lease by LAPSED_CLAIM_KEEP_MS,
// and a marked one its grace by as much, so the takeover grace is counted from the first
// claim that finds the lease over (even when Redis was paused past the lease end, up to
// that long); an older 'claim:<token>' holds until its TTL. Times are Redis's own (TIME,
// so Redis 5 or later: scripts replicated by effects). One script per operation: atomic,
// and one round trip.
const HELD = `local function held(v)
  if not v then return nil end
  local tok, dl, st = string.match(v, '^claim:([%w_%-]+):?(%d*):?(%d*)$')
  return tok, tonumber(dl), tonumber(st)
end
local function put(key, token, leaseEnd, staleAt, px)
  local v = 'claim:' .. token .. ':' .. string.format('%d', leaseEnd)
  if staleAt then v = v .. ':' .. string.format('%d', staleAt) end
  redis.call('SET', key, v, 'PX', px)
end
`;
const CLOCK = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;
// ARGV: token, lease, grace, keep. Replies: {1} acquired, {2} completed, {3, ms left} held, {4, ms} stale.
const CLAIM = `${HELD}${CLOCK}local v = redis.call('GET', KEYS[1])
if v == '${DONE}' then return {2} end
local tok, dl, st = held(v)
local keep = tonumber(ARGV[4])
if v and tok ~= ARGV[1] then
  if not dl then return {3, redis.call('PTTL', KEYS[1])} end
  if dl > now then return {3, dl - now} end
  local grace = tonumber(ARGV[3])
  if grace > 0 then
    if not st then
      st = now
      put(KEYS[1], tok, dl, st, math.max(redis.call('PTTL', KEYS[1]), grace + keep))
    end
    if st + grace > now then return {4, st + grace - now} end
  end
end
local lease = tonumber(ARGV[2])
put(KEYS[1], ARGV[1], now + lease, nil, lease + keep) return {1}`;
// Held by another token whose lease is not over, or completed: refused.
const RENEW = `${HELD}${CLOCK}local v = redis.call('GET', KEYS[1])
if v then
  local tok, dl = held(v)
  if tok ~= ARGV[1] and not (tok and dl and dl <= now) then return 0 end
end
local lease = tonumber(ARGV[2])
put(KEYS[1], ARGV[1], now + lease, nil, lease + tonumber(ARGV[3])) return 1`;
// KEYS: job key, pending set, pending parameters; ARGV: token, retention, job id.
const COMPLETE = `${HELD}${CLOCK}local v = redis.call('GET', KEYS[1])
if v and v ~= '${DONE}' then
  local tok, dl = held(v)
  if tok ~= ARGV[1] and not (dl and dl <= now) then return 0 end
end
redis.call('SET', KEYS[1], '${DONE}', 'PX', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3]) redis.call('HDEL', KEYS[3], ARGV[3]) return 1`;
const TRACK = `redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) else redis.call('HDEL', KEYS[2], ARGV[1]) end return 1`;
const FORGET = `redis.call('ZREM', KEYS[1], ARGV[1]) redis.call('HDEL', KEYS[2], ARGV[1]) return 1`;
const RELEASE = `${HELD}if held(redis.call('GET', KEYS[1])) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0`;

interface ScriptedRedis extends Redis {
  jobhookClaim(key: string, token: string, leaseMs: number, graceMs: number, keepMs: number): Promise<[number, number?]>;
  jobhookRenew(key: string, token: string, leaseMs: number, keepMs: number): Promise<number>;
  jobhookComplete(key: string, pendingKey: string, paramsKey: string, token: string, retainMs: number, jobId: string): Promise<number>;
  jobhookTrack(pendingKey: string, paramsKey: string, jobId: string, since: number, params: string): Promise<number>;
  jobhookForget(pendingKey: string, paramsKey: string, jobId: string): Promise<number>;
  jobhookRelease(key: string, token: string): Promise<number>;
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
    const { leaseMs, token, graceMs } = claimArgs(jobId, options);
    const key = this.prefix + jobId;
    return this.run('claim', async (redis) => {
      const [state, ms] = await redis.jobhookClaim(key, token, leaseMs, graceMs, LAPSED_CLAIM_KEEP_MS);
      if (state === 1) return { status: 'acquired', token };
      if (state === 2) return { status: 'completed' };
      if (state === 4) return { status: 'in_progress', retryAfterMs: Math.max(1, Number(ms)), stale: true };
      return { status: 'in_progress', retryAfterMs: Math.max(1, Number(ms)) };
    });
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<boolean> {
    const { leaseMs } = renewArgs(jobId, token, options);
    const key = this.prefix + jobId;
    return this.run('renew', async (redis) => (await redis.jobhookRenew(key, token, leaseMs, LAPSED_CLAIM_KEEP_MS)) === 1);
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<boolean> {
    const { retainMs } = completeArgs(jobId, token, options);
    const key = this.prefix + jobId;
    return this.run('complete', async (redis) => (await redis.jobhookComplete(key, this.pendingKey, this.paramsKey, token, retainMs, jobId)) === 1);
  }

  async release(jobId: string, token: string): Promise<boolean> {
    releaseArgs(jobId, token);
    const key = this.prefix + jobId;
    return this.run('release', async (redis) => (await redis.jobhookRelease(key, token)) === 1);
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
