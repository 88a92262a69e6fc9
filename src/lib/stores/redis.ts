import type { Redis, RedisOptions } from 'ioredis';
import { StoreUnavailableError } from '../base/errors.js';
import { errorDetails, resolveLogger, type Logger, type LoggerInput } from '../base/log.js';
import { optionalNumber } from '../base/options.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { requirePeer } from '../runtime/peer.js';
import { guarded } from './timeout.js';
import { addressOf, StoreProbe, storeFailure } from './diagnose.js';
import type { JsonObjectValue } from '../core/event.js';
import { GRACE_WINDOW_MS } from '../jobs/model.js';
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
  type CompleteReply,
  type RenewReply,
  type ReleaseOptions,
  type RenewOptions,
  type TrackPendingOptions,
} from '../jobs/store.js';

export interface RedisStoreOptions {
  /** An ioredis client you manage (its options are yours), or… */
  client?: Redis;
  /** …a redis:// URL: the store creates a client with short timeouts and closes it in `close()`. */
  url?: string;
  /** Prefix of the keys (default `jobhook:job:`). */
  keyPrefix?: string;
  /**
   * Key of the sorted set of pending jobs (default `jobhook:pending`; its parameters go in
   * `<pendingKey>:params`, the fencing counter in `<pendingKey>:fence`). Must not start with `keyPrefix`. On Redis Cluster, give both
   * the same hash tag (e.g. `{jobhook}:job:` and `{jobhook}:pending`): completion touches both.
   */
  pendingKey?: string;
  /** Deadline of one store operation before it fails with STORE_UNAVAILABLE (default 2,000 ms). */
  operationTimeoutMs?: number;
  /**
   * Where the store tells what is wrong before a delivery fails on it (Redis unreachable,
   * a password refused, found by a probe it starts at construction; no append-only file):
   * default warnings and errors to the console; `false`: nothing.
   */
  log?: LoggerInput;
  /**
   * A clock in epoch ms to use instead of Redis's own (tests of the protocol's timing).
   * Leave it out in production: every instance then shares the server's clock.
   */
  now?: () => number;
}

// Values, one key per job (PX: how long it is kept):
//   'held:<token>:<fence>:<lease end ms>:<stale since ms or empty>[:1]'  claimed (':1':
//       it took the job over); kept LAPSED_CLAIM_KEEP_MS past its lease end (a marked
//       one as long past its grace), so a claim coming that much later still finds it
//       lapsed and reports the takeover;
//   'released:<token>:<fence>:<keep end ms>:<0|1>'  released ('1': tainted, the released
//       claim had taken the job over); PX = the keep;
//   'done:<token>:<fence>:<retention end ms>[:1]'  completed (':1': by a superseded
//       token); PX = retention too.
// Values of earlier versions are read too: 'claim:<token>[:<lease end>[:<stale since>]]'
// (fence 0; without a lease end it holds until its TTL) and 'done' (completed by an
// unknown token). Fencing numbers come from one counter (INCR) per store, never less
// than one more than the record's. Times are Redis's own (TIME, so Redis 5 or later:
// scripts replicated by effects) unless the store was given a clock (tests). One script
// per operation: atomic, one round trip. Each script implements one case of the
// protocol's transition (src/lib/jobs/model.ts); test/jobs/model-based.test.ts holds
// them to it.
const READ = `local function parse(v, now)
  if not v then return nil end
  if v == 'done' then return 'completed' end
  local t, f, u, s = string.match(v, '^done:([%w_%-]+):(%d+):(%d+):?(1?)$')
  if t then
    if tonumber(u) <= now then return nil end
    return 'completed', t, tonumber(f), nil, nil, s == '1'
  end
  t, f, u, s = string.match(v, '^released:([%w_%-]+):(%d+):(%d+):([01])$')
  if t then
    if tonumber(u) <= now then return nil end
    return 'released', t, tonumber(f), nil, nil, s == '1'
  end
  local tok, fence, dl, st, took = string.match(v, '^held:([%w_%-]+):(%d+):(%d+):(%d*):?(1?)$')
  if tok then return 'held', tok, tonumber(fence), tonumber(dl), tonumber(st), took == '1' end
  tok, dl, st = string.match(v, '^claim:([%w_%-]+):?(%d*):?(%d*)$')
  if tok then return 'held', tok, 0, tonumber(dl), tonumber(st), false end
  return 'foreign'
end
local function put(key, token, fence, leaseEnd, staleAt, took, px)
  local v = 'held:' .. token .. ':' .. string.format('%d', fence) .. ':' .. string.format('%d', leaseEnd) .. ':'
  if staleAt then v = v .. string.format('%d', staleAt) end
  if took then v = v .. ':1' end
  redis.call('SET', key, v, 'PX', math.max(1, px))
end
local function nextFence(counter, old)
  local f = redis.call('INCR', counter)
  if old and f <= old then
    f = old + 1
    redis.call('SET', counter, string.format('%d', f))
  end
  return f
end
local function clock(given)
  if given ~= '' then return tonumber(given) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;
// KEYS: job, fence counter. ARGV: token, lease, grace, keep, now, grace window.
// Replies: {1, fence, took over 0|1} acquired, {2} completed, {3, ms left} held, {4, ms} stale.
const CLAIM = `${READ}local now = clock(ARGV[5])
local state, tok, fence, dl, st, flag = parse(redis.call('GET', KEYS[1]), now)
local lease, keep = tonumber(ARGV[2]), tonumber(ARGV[4])
if state == 'completed' then return {2} end
if state == 'foreign' then return {3, redis.call('PTTL', KEYS[1])} end
local took = false
if state == 'held' then
  if tok == ARGV[1] then
    put(KEYS[1], tok, fence, now + lease, nil, flag, lease + keep)
    if flag then return {1, fence, 1} end
    return {1, fence, 0}
  end
  if not dl then return {3, redis.call('PTTL', KEYS[1])} end
  if dl > now then return {3, dl - now} end
  local grace = tonumber(ARGV[3])
  if grace > 0 and (st or now < dl + tonumber(ARGV[6])) then
    if not st then
      st = now
      put(KEYS[1], tok, fence, dl, st, flag, math.max(redis.call('PTTL', KEYS[1]), grace + keep))
    end
    if st + grace > now then return {4, st + grace - now} end
  end
  took = true
elseif state == 'released' then
  took = flag
end
local f = nextFence(KEYS[2], fence)
put(KEYS[1], ARGV[1], f, now + lease, nil, took, lease + keep)
if took then return {1, f, 1} end
return {1, f, 0}`;
// KEYS: job, fence counter. ARGV: token, lease, keep, fence ('' = none), now.
// Replies: 1 renewed, 0 superseded, 2 completed by this token.
const RENEW = `${READ}local now = clock(ARGV[5])
local state, tok, fence, dl, st, flag = parse(redis.call('GET', KEYS[1]), now)
if state == 'completed' then if tok == ARGV[1] then return 2 end return 0 end
if state == 'foreign' or state == 'released' or (state == 'held' and tok ~= ARGV[1]) then return 0 end
if not state then fence = tonumber(ARGV[4]) or redis.call('INCR', KEYS[2]) flag = false end
local lease = tonumber(ARGV[2])
put(KEYS[1], ARGV[1], fence, now + lease, nil, flag, lease + tonumber(ARGV[3]))
return 1`;
// KEYS: job, pending set, pending parameters. ARGV: token, retention, job id, fence ('' = none), now.
// Replies: 1 completed, 0 superseded (the mark is still written when nobody holds the
// job: the holder that superseded this token has lapsed itself, or it was released).
const COMPLETE = `${READ}local now = clock(ARGV[5])
local state, tok, fence, dl, st, flag = parse(redis.call('GET', KEYS[1]), now)
if state == 'completed' then if tok == nil or (tok == ARGV[1] and not flag) then return 1 end return 0 end
local reply = 1
if state == 'foreign' then return 0 end
if state == 'held' and tok ~= ARGV[1] then
  if not dl or dl > now then return 0 end
  reply = 0
end
if state == 'released' then reply = 0 end
local f = ARGV[4]
if f == '' then f = '0' end
local v = 'done:' .. ARGV[1] .. ':' .. f .. ':' .. string.format('%d', now + tonumber(ARGV[2]))
if reply == 0 then v = v .. ':1' end
redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3]) redis.call('HDEL', KEYS[3], ARGV[3]) return reply`;
const TRACK = `redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) else redis.call('HDEL', KEYS[2], ARGV[1]) end return 1`;
const FORGET = `redis.call('ZREM', KEYS[1], ARGV[1]) redis.call('HDEL', KEYS[2], ARGV[1]) return 1`;
// ARGV: token, keep, now, tainted (1: by the caller). The claim is replaced by a release, kept that long.
const RELEASE = `${READ}local now = clock(ARGV[3])
local state, tok, fence, dl, st, flag = parse(redis.call('GET', KEYS[1]), now)
if state ~= 'held' or tok ~= ARGV[1] then return 0 end
local keep = tonumber(ARGV[2])
if keep <= 0 then redis.call('DEL', KEYS[1]) return 1 end
local t = '0'
if flag or ARGV[4] == '1' then t = '1' end
redis.call('SET', KEYS[1], 'released:' .. tok .. ':' .. string.format('%d', fence) .. ':' .. string.format('%d', now + keep) .. ':' .. t, 'PX', keep)
return 1`;

interface ScriptedRedis extends Redis {
  jobhookClaim(
    key: string,
    fenceKey: string,
    token: string,
    leaseMs: number,
    graceMs: number,
    keepMs: number,
    now: string,
    windowMs: number,
  ): Promise<[number, number?, number?]>;
  jobhookRenew(
    key: string,
    fenceKey: string,
    token: string,
    leaseMs: number,
    keepMs: number,
    fence: string,
    now: string,
  ): Promise<number>;
  jobhookComplete(
    key: string,
    pendingKey: string,
    paramsKey: string,
    token: string,
    retainMs: number,
    jobId: string,
    fence: string,
    now: string,
  ): Promise<number>;
  jobhookTrack(
    pendingKey: string,
    paramsKey: string,
    jobId: string,
    since: number,
    params: string,
  ): Promise<number>;
  jobhookForget(pendingKey: string, paramsKey: string, jobId: string): Promise<number>;
  jobhookRelease(key: string, token: string, keepMs: number, now: string, tainted: string): Promise<number>;
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
  private readonly fenceKey: string;
  private readonly timeoutMs: number;
  private readonly now: (() => number) | undefined;
  private readonly log: Logger;
  private persistenceChecked = false;
  /** `Redis at host:port`: the server, in every failure's message. */
  private readonly backend: string;
  /** The client's last connection error (a client the store made), cleared when it is ready again. */
  private lastError: unknown;
  private readonly probe: StoreProbe;

  constructor(options: RedisStoreOptions) {
    checkOptionNames(options, REDIS_STORE_OPTIONS);
    if ((options?.client === undefined) === (options?.url === undefined))
      throw new TypeError('RedisIdempotencyStore needs exactly one of client or url');
    this.prefix = options.keyPrefix ?? 'jobhook:job:';
    if (typeof this.prefix !== 'string') throw new TypeError('keyPrefix must be a string');
    this.pendingKey = options.pendingKey ?? 'jobhook:pending';
    this.paramsKey = `${this.pendingKey}:params`;
    this.fenceKey = `${this.pendingKey}:fence`;
    if (
      typeof this.pendingKey !== 'string' ||
      [this.pendingKey, this.paramsKey, this.fenceKey].some((k) => k.startsWith(this.prefix))
    ) {
      throw new TypeError(
        `pendingKey must be a string such that neither it nor ${JSON.stringify(`${String(options.pendingKey)}:params`)} or ${JSON.stringify(`${String(options.pendingKey)}:fence`)} starts with keyPrefix (${JSON.stringify(this.prefix)}), or a job id could name it`,
      );
    }
    if (options.now !== undefined && typeof options.now !== 'function')
      throw new TypeError('now must be a function returning epoch milliseconds');
    this.now = options.now;
    this.timeoutMs = optionalNumber(options.operationTimeoutMs, 'operationTimeoutMs', 2000);
    this.log = resolveLogger(options.log);
    this.owned = options.client === undefined;
    this.client = scripted(options.client ?? this.connect(options.url!));
    const o = (this.client as { options?: { host?: string; port?: number; path?: string } }).options ?? {};
    this.backend = `Redis at ${addressOf({ host: o.host, port: o.port, ...(o.path ? { path: o.path } : {}), defaultPort: 6379 })}`;
    this.probe = new StoreProbe(this.log);
    // Only on a client the store made: a client you pass is yours to use (a PING sent as you
    // quit it writes to a closing socket, an 'error' event on your client); await ready() instead.
    if (this.owned) this.probe.start('the Redis store', () => this.ready());
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
    // Told with the failures of the operations (the address and this cause); ioredis reconnects by itself.
    client.on('error', (err) => (this.lastError = err));
    client.on('ready', () => (this.lastError = undefined));
    return client;
  }

  private run<T>(
    operation: string,
    fn: (client: ScriptedRedis) => Promise<T>,
    waitForReconnect = false,
  ): Promise<T> {
    // Known down (the connection failed and ioredis has not reconnected since): answer at once,
    // while it reconnects in the background, rather than after operationTimeoutMs per delivery.
    // ready() waits for the reconnection instead (within operationTimeoutMs).
    if (!waitForReconnect && this.lastError !== undefined && this.client.status !== 'ready')
      return Promise.reject(storeFailure(this.backend, operation, this.lastError, this.lastError));
    if (!this.persistenceChecked) {
      this.persistenceChecked = true;
      void this.checkPersistence();
    }
    return guarded(
      this.backend,
      operation,
      this.timeoutMs,
      () => fn(this.client),
      () => this.lastError,
    );
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
      const eviction = await this.evictionProblem();
      if (eviction !== undefined) this.log.error(`jobhook: ${eviction}.`);
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

  /** The clock argument of a script: the store's own clock when one was given (tests), else '' (Redis's TIME). */
  private clock(): string {
    return this.now === undefined ? '' : String(Math.floor(this.now()));
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const { leaseMs, token, graceMs } = claimArgs(jobId, options);
    const key = this.prefix + jobId;
    return this.run('claim', async (redis) => {
      const [state, a, b] = await redis.jobhookClaim(
        key,
        this.fenceKey,
        token,
        leaseMs,
        graceMs,
        LAPSED_CLAIM_KEEP_MS,
        this.clock(),
        GRACE_WINDOW_MS,
      );
      if (state === 1)
        return { status: 'acquired', token, fence: Number(a), ...(b === 1 ? { tookOver: true } : {}) };
      if (state === 2) return { status: 'completed' };
      if (state === 4) return { status: 'in_progress', retryAfterMs: Math.max(1, Number(a)), stale: true };
      return { status: 'in_progress', retryAfterMs: Math.max(1, Number(a)) };
    });
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<RenewReply> {
    const { leaseMs, fence } = renewArgs(jobId, token, options);
    const key = this.prefix + jobId;
    return this.run('renew', async (redis) => {
      const r = await redis.jobhookRenew(
        key,
        this.fenceKey,
        token,
        leaseMs,
        LAPSED_CLAIM_KEEP_MS,
        fence === undefined ? '' : String(fence),
        this.clock(),
      );
      return r === 1 ? 'renewed' : r === 2 ? 'completed' : 'superseded';
    });
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<CompleteReply> {
    const { retainMs, fence } = completeArgs(jobId, token, options);
    const key = this.prefix + jobId;
    return this.run('complete', async (redis) => {
      const r = await redis.jobhookComplete(
        key,
        this.pendingKey,
        this.paramsKey,
        token,
        retainMs,
        jobId,
        fence === undefined ? '' : String(fence),
        this.clock(),
      );
      return r === 1 ? 'completed' : 'superseded';
    });
  }

  /**
   * Resolves when Redis answers PING within the operation deadline; rejects with
   * STORE_UNAVAILABLE naming the server (host and port) and the cause (connection
   * refused, a password refused or missing, a timeout). A store made from `url` starts it
   * at construction and logs a failure; await it at start to fail fast instead (with a
   * `client` you pass, nothing is sent before you call it or the first operation).
   *
   * @example
   * ```ts
   * const store = new RedisIdempotencyStore({ url: process.env.REDIS_URL! });
   * await store.ready();
   * ```
   */
  async ready(): Promise<void> {
    await this.run('ping', (redis) => redis.ping(), true);
    const unsafe = await this.evictionProblem();
    if (unsafe !== undefined) throw new StoreUnavailableError(unsafe);
  }

  /**
   * Why this Redis may evict completion marks under memory pressure (every mark has a
   * TTL, so a `volatile-*` policy picks them first, and an `allkeys-*` one may), or
   * undefined when it cannot: no `maxmemory`, or `maxmemory-policy noeviction`. Read
   * through INFO, which managed services that refuse CONFIG answer too.
   */
  private async evictionProblem(): Promise<string | undefined> {
    const info = await this.run('info', (redis) => redis.info('memory'));
    const maxmemory = Number(/^maxmemory:(\d+)/m.exec(info)?.[1] ?? '0');
    const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1] ?? 'noeviction';
    if (maxmemory === 0 || policy === 'noeviction') return undefined;
    return `this Redis evicts keys under memory pressure (maxmemory ${maxmemory} bytes, maxmemory-policy ${policy}): a completed job's mark could be evicted, and its redelivery would run the handler again with nothing reported. Set maxmemory-policy noeviction (writes then fail loudly when memory is full), or remove maxmemory, or use a Redis of its own for jobhook`;
  }

  /** The same check as `ready()`, for readiness probes (`receiver.health()` reports its failure). */
  async ping(): Promise<void> {
    await this.ready();
  }

  async release(jobId: string, token: string, options?: ReleaseOptions): Promise<boolean> {
    const { tainted } = releaseArgs(jobId, token, options);
    const key = this.prefix + jobId;
    return this.run(
      'release',
      async (redis) =>
        (await redis.jobhookRelease(key, token, LAPSED_CLAIM_KEEP_MS, this.clock(), tainted ? '1' : '0')) ===
        1,
    );
  }

  async trackPending(jobId: string, options: TrackPendingOptions = {}): Promise<void> {
    const { since, userParameters: params } = trackArgs(jobId, options);
    await this.run('trackPending', (redis) =>
      redis.jobhookTrack(
        this.pendingKey,
        this.paramsKey,
        jobId,
        since,
        params === undefined ? '' : JSON.stringify(params),
      ),
    );
  }

  async listPending(options: ListPendingOptions): Promise<PendingJob[]> {
    const { before, limit } = listArgs(options);
    return this.run('listPending', async (redis) => {
      const flat = await redis.zrangebyscore(
        this.pendingKey,
        '-inf',
        before,
        'WITHSCORES',
        'LIMIT',
        0,
        limit,
      );
      const ids = flat.filter((_, k) => k % 2 === 0);
      const params = ids.length === 0 ? [] : await redis.hmget(this.paramsKey, ...ids);
      return ids.map((jobId, k) => {
        const json = params[k];
        return {
          jobId,
          since: Number(flat[2 * k + 1]),
          ...(json ? { userParameters: JSON.parse(json) as JsonObjectValue } : {}),
        };
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
    this.probe.close();
    if (!this.owned) return;
    await this.client.quit().catch(() => this.client.disconnect());
  }
}

function scripted(client: Redis): ScriptedRedis {
  const c = client as ScriptedRedis;
  // defineCommand sends EVALSHA and falls back to EVAL after a server restart (NOSCRIPT).
  if (typeof c.jobhookClaim !== 'function')
    client.defineCommand('jobhookClaim', { numberOfKeys: 2, lua: CLAIM });
  if (typeof c.jobhookRenew !== 'function')
    client.defineCommand('jobhookRenew', { numberOfKeys: 2, lua: RENEW });
  if (typeof c.jobhookComplete !== 'function')
    client.defineCommand('jobhookComplete', { numberOfKeys: 3, lua: COMPLETE });
  if (typeof c.jobhookTrack !== 'function')
    client.defineCommand('jobhookTrack', { numberOfKeys: 2, lua: TRACK });
  if (typeof c.jobhookForget !== 'function')
    client.defineCommand('jobhookForget', { numberOfKeys: 2, lua: FORGET });
  if (typeof c.jobhookRelease !== 'function')
    client.defineCommand('jobhookRelease', { numberOfKeys: 1, lua: RELEASE });
  return c;
}

/** The names of {@link RedisStoreOptions}. */
export const REDIS_STORE_OPTIONS = {
  client: true,
  url: true,
  keyPrefix: true,
  pendingKey: true,
  operationTimeoutMs: true,
  log: true,
  now: true,
} as const satisfies OptionNamesOf<RedisStoreOptions>;
