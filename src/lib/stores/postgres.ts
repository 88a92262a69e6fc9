import type { Pool, PoolClient, PoolConfig } from 'pg';
import { checkMs, optionalNumber } from '../base/options.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { requirePeer } from '../runtime/peer.js';
import { guarded } from './timeout.js';
import { StoreUnavailableError } from '../base/errors.js';
import { resolveLogger, type LoggerInput } from '../base/log.js';
import { addressOf, firstUse, notMigrated, StoreProbe } from './diagnose.js';
import { checkSchema, type StoreRelations } from './postgres-check.js';
import type { JsonObjectValue } from '../core/event.js';
import { GRACE_WINDOW_MS } from '../jobs/model.js';
import {
  checkJobId,
  checkToken,
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
  type StoreTransaction,
  type TransactionalStore,
  type ReleaseOptions,
  type RenewOptions,
  type TrackPendingOptions,
} from '../jobs/store.js';

export interface PostgresStoreOptions {
  /** A pg Pool you manage (attach your own 'error' listener), or… */
  pool?: Pool;
  /** …a connection string: the store creates a pool with short timeouts and ends it in `close()`. */
  connectionString?: string;
  /** Table name (default `jobhook_jobs`). */
  table?: string;
  /** Schema (default `public`). */
  schema?: string;
  /** Deadline of one store operation before it fails with STORE_UNAVAILABLE (default 5,000 ms). */
  operationTimeoutMs?: number;
  /**
   * Exactly-once effects (the inbox pattern): the handler gets `context.transaction`, a
   * `pg` client inside an open transaction on this database, and the job's completion is
   * written in that same transaction, conditioned on the claim's token and fencing
   * number. jobhook commits once the handler resolved and answers 200 only then; it rolls
   * back when the handler throws, the claim was taken over, or its lease could not be
   * held. Each running handler holds one connection of the pool besides the store's own
   * operations: size the pool above the deliveries you process at once.
   */
  transactional?: boolean;
  /**
   * Create the tables at first use (the construction's readiness probe, else the first
   * operation), as `migrate()` does: once per store (concurrent first operations wait for
   * the one migration), and safe with other instances migrating at once (an advisory
   * lock serialises them). Default false: run `migrate()` yourself, e.g. at deployment,
   * where the database user may create tables. The receiver's user then needs the
   * privilege to create them.
   */
  migrate?: boolean;
  /**
   * Where the store tells what is wrong before a delivery fails on it (the server
   * unreachable, authentication refused, the tables not migrated; found by a probe it
   * starts at construction): default warnings and errors to the console; `false`: nothing.
   */
  log?: LoggerInput;
  /**
   * A clock in epoch ms to use instead of the server's own (tests of the protocol's
   * timing). Leave it out in production: every instance then shares the server's clock.
   */
  now?: () => number;
}

/** Whether a pg client has a query running or queued (pg 8's fields, read without its deprecation notices). */
function busy(client: PoolClient): boolean {
  const c = client as unknown as {
    _getActiveQuery?: () => unknown;
    activeQuery?: unknown;
    _queryQueue?: unknown[];
    queryQueue?: unknown[];
  };
  const active = typeof c._getActiveQuery === 'function' ? c._getActiveQuery() : c.activeQuery;
  const queued = c._queryQueue ?? c.queryQueue;
  return (active !== null && active !== undefined) || (queued?.length ?? 0) > 0;
}

/** The claim a transaction of `begin` belongs to, and the transaction's id. */
interface TransactionClaim {
  jobId: string;
  token: string;
  fence: number;
  xid: string;
}

/** Options of `purgeExpired()`. */
export interface PurgeOptions {
  /** Rows deleted per statement (default 1,000): each statement holds its row locks only that long. */
  batchSize?: number;
}

/**
 * The retention rule, in one place: the condition under which `purgeExpired()` deletes a
 * row `t` whose `expires_at` is at or before `now` (a completed mark's retention or a
 * claim's lease is over). Completed marks go then; a claim is kept `keepMs`
 * (LAPSED_CLAIM_KEEP_MS) past its lease end, or past its takeover-grace mark when later,
 * so a purge never cuts a grace short. The purge scans only the `expires_at <= now`
 * range of the index: whatever this rule lets go must lie in it.
 */
function purgeable(now: string, keepMs: string): string {
  return `(t.state <> 'claimed' OR greatest(t.expires_at, t.stale_at) <= ${now} - ${keepMs} * interval '1 millisecond')`;
}

/**
 * How much longer than the lease a handler's transaction may sit idle before the server
 * ends it (idle_in_transaction_session_timeout, set at BEGIN): each renewal of the claim
 * keeps it alive, so only a holder cut off from the server (or that lost its lease) lets
 * it run out, and a takeover then waits for its row locks no longer than this.
 */
const TRANSACTION_IDLE_MARGIN_MS = 1000;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

function ident(value: string, what: string): string {
  if (!IDENTIFIER.test(value))
    throw new TypeError(
      `${what} must be a plain SQL identifier (letters, digits, _); got ${JSON.stringify(value)}`,
    );
  return `"${value}"`;
}

/**
 * Idempotency store on PostgreSQL: one table, a claim is an `INSERT … ON CONFLICT
 * … DO UPDATE … WHERE` the lease (or retention) ran out. Call `migrate()` once
 * (safe to run concurrently) and schedule `purgeExpired()`.
 *
 * @example
 * ```ts
 * import { PostgresIdempotencyStore } from 'jobhook/postgres';
 *
 * const store = new PostgresIdempotencyStore({ connectionString: process.env.DATABASE_URL! }); // or { pool }
 * await store.migrate();
 * setInterval(() => store.purgeExpired({ batchSize: 1000 }).catch(console.error), 3_600_000).unref();
 * app.post('/webhooks/gateway', webhookReceiver({ publicKey, store, onEvent }));
 * ```
 */
export class PostgresIdempotencyStore implements PendingStore, TransactionalStore<PoolClient> {
  private readonly pool: Pool;
  private readonly owned: boolean;
  private readonly table: string;
  /** Schema and table as written (for the catalog). */
  private readonly names: [string, string];
  private readonly pendingTable: string;
  private readonly pendingIndex: string;
  private readonly index: string;
  /** The two index names as written (for the catalog). */
  private readonly indexNames: { jobs: string; pending: string };
  private readonly lockKey: string;
  private readonly fenceSeq: string;
  private readonly timeoutMs: number;
  private readonly now: (() => number) | undefined;
  /** Whether handlers get a transaction in which their job's completion is written (see the option). */
  readonly transactional: boolean;
  private openTransactions = 0;
  private readonly slotWaiters: Array<() => void> = [];
  /** `PostgreSQL at host:port/database`: the server, in every failure's message. */
  private readonly backend: string;
  /** With `migrate: true`: the migration of the first use (undefined once done). */
  private readonly autoMigrate: (() => Promise<void> | undefined) | undefined;
  private readonly probe: StoreProbe;
  private migrateCalls = 0;

  constructor(options: PostgresStoreOptions) {
    checkOptionNames(options, POSTGRES_STORE_OPTIONS);
    if ((options?.pool === undefined) === (options?.connectionString === undefined)) {
      throw new TypeError('PostgresIdempotencyStore needs exactly one of pool or connectionString');
    }
    const schema = options.schema ?? 'public';
    const table = options.table ?? 'jobhook_jobs';
    this.table = `${ident(schema, 'schema')}.${ident(table, 'table')}`;
    this.names = [schema, table];
    this.indexNames = {
      jobs: `${table.slice(0, 50)}_expires_at`,
      pending: `${table.slice(0, 50)}_pending_since`,
    };
    this.index = ident(this.indexNames.jobs, 'table');
    this.pendingTable = `${ident(schema, 'schema')}.${ident(`${table.slice(0, 54)}_pending`, 'table')}`;
    this.pendingIndex = ident(this.indexNames.pending, 'table');
    this.lockKey = `jobhook:${schema}.${table}`;
    this.fenceSeq = `${ident(schema, 'schema')}.${ident(`${table.slice(0, 50)}_fence_seq`, 'table')}`;
    if (options.transactional !== undefined && typeof options.transactional !== 'boolean')
      throw new TypeError('transactional must be true or false');
    this.transactional = options.transactional === true;
    if (options.now !== undefined && typeof options.now !== 'function')
      throw new TypeError('now must be a function returning epoch milliseconds');
    this.now = options.now;
    this.timeoutMs = optionalNumber(options.operationTimeoutMs, 'operationTimeoutMs', 5000);
    this.owned = options.pool === undefined;
    this.pool = options.pool ?? this.connect(options.connectionString!);
    if (this.transactional) checkPoolSize(this.pool);
    if (options.migrate !== undefined && typeof options.migrate !== 'boolean')
      throw new TypeError('migrate must be true or false');
    this.autoMigrate = options.migrate === true ? firstUse(() => this.migrate()) : undefined;
    const o =
      (
        this.pool as {
          options?: { connectionString?: string; host?: string; port?: number; database?: string };
        }
      ).options ?? {};
    this.backend = `PostgreSQL at ${addressOf({ url: options.connectionString ?? o.connectionString, host: o.host, port: o.port, database: o.database, defaultPort: 5432 })}`;
    this.probe = new StoreProbe(resolveLogger(options.log));
    // A missing table found while a migrate() runs is that migrate()'s to tell.
    const calls = this.migrateCalls;
    this.probe.start(
      'the PostgreSQL store',
      () => this.ready(),
      (err) => (err as { code?: unknown })?.code === 'STORE_NOT_MIGRATED' && this.migrateCalls > calls,
    );
  }

  private connect(connectionString: string): Pool {
    const pg = requirePeer<typeof import('pg')>('pg', 'PostgresIdempotencyStore');
    const config: PoolConfig = {
      connectionString,
      connectionTimeoutMillis: this.timeoutMs,
      query_timeout: this.timeoutMs,
      idleTimeoutMillis: 10_000,
      allowExitOnIdle: true,
    };
    const pool = new pg.Pool(config);
    pool.on('error', () => undefined); // an idle connection died (server restart); the next query reconnects
    return pool;
  }

  private run<T>(operation: string, fn: (pool: Pool) => Promise<T>): Promise<T> {
    const migrating = operation === 'migrate' ? undefined : this.autoMigrate?.();
    if (migrating !== undefined) return migrating.then(() => this.run(operation, fn));
    return guarded(this.backend, operation, this.timeoutMs, async () => {
      try {
        return await fn(this.pool);
      } catch (err) {
        // 22P05, 22021: a job id this database's encoding cannot hold. Not an outage: say so.
        const code = (err as { code?: unknown }).code;
        if (code === '22P05' || code === '22021') {
          throw new TypeError(
            `jobId cannot be stored in this database (its encoding is not UTF8; migrate() refuses such databases): ${(err as Error).message}`,
            { cause: err },
          );
        }
        throw (
          (operation === 'migrate'
            ? undefined
            : notMigrated(err, this.backend, `${this.table}, ${this.pendingTable}, ${this.fenceSeq}`)) ?? err
        );
      }
    });
  }

  /** Creates the table and its index if missing. Concurrent calls are serialised by an advisory lock. */
  async migrate(): Promise<void> {
    this.migrateCalls++;
    await this.run('migrate', async (pool) => {
      const client = await pool.connect();
      try {
        await this.checkEncoding(client);
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [this.lockKey]);
        await this.createJobsTable(client);
        await this.addMissingColumns(client);
        await this.widenStateCheck(client);
        // Fencing numbers: one sequence per table, so a takeover always gets a larger one.
        await client.query(`CREATE SEQUENCE IF NOT EXISTS ${this.fenceSeq}`);
        await this.createPendingTable(client);
        await this.createIndexes(client);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    });
  }

  // The steps of migrate(), in its transaction. Each statement's text is as written
  // before the steps were split out, indentation included.

  /**
   * Job ids are any well-formed Unicode: a database in another encoding (LATIN1, …)
   * cannot store some of them, and each such delivery would fail for good.
   */
  private async checkEncoding(client: PoolClient): Promise<void> {
    const { rows } = await client.query<{ encoding: string }>(
      'SELECT pg_encoding_to_char(encoding) AS encoding FROM pg_database WHERE datname = current_database()',
    );
    const encoding = rows[0]?.encoding ?? 'unknown';
    if (encoding !== 'UTF8') {
      throw new TypeError(
        `PostgresIdempotencyStore needs a UTF8 database: this one is ${encoding}, which cannot store every job id (any Unicode text). Use a database created WITH ENCODING 'UTF8' (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0).`,
      );
    }
  }

  private async createJobsTable(client: PoolClient): Promise<void> {
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${this.table} (
             job_id text PRIMARY KEY,
             token text,
             state text NOT NULL CHECK (state IN ('claimed', 'completed', 'released')),
             expires_at timestamptz NOT NULL,
             stale_at timestamptz,
             fence bigint NOT NULL DEFAULT 0,
             took_over boolean NOT NULL DEFAULT false
           )`,
    );
  }

  /**
   * Tables made by an earlier version: the columns added since (looked up first, so
   * a table that has them all is not locked by ALTER TABLE on every start).
   */
  private async addMissingColumns(client: PoolClient): Promise<void> {
    const has = await client.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`,
      this.names,
    );
    const columns = new Set(has.rows.map((r) => r.column_name));
    const added: Record<string, string> = {
      stale_at: 'timestamptz',
      fence: 'bigint NOT NULL DEFAULT 0',
      took_over: 'boolean NOT NULL DEFAULT false',
    };
    for (const [column, type] of Object.entries(added)) {
      if (!columns.has(column))
        await client.query(`ALTER TABLE ${this.table} ADD COLUMN IF NOT EXISTS ${column} ${type}`);
    }
  }

  /**
   * A state check of an earlier version (claimed or completed) lets in 'released' too,
   * only when the catalog shows it lacks it. NOT VALID: the rows already satisfy the
   * narrower check, so the table is not scanned.
   */
  private async widenStateCheck(client: PoolClient): Promise<void> {
    const checks = await client.query<{ conname: string; def: string }>(
      `SELECT c.conname, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
             JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
            WHERE n.nspname = $1 AND r.relname = $2 AND c.contype = 'c'`,
      this.names,
    );
    for (const { conname, def } of checks.rows) {
      if (!/\bstate\b/.test(def) || def.includes("'released'")) continue;
      await client.query(
        `ALTER TABLE ${this.table} DROP CONSTRAINT "${conname.replace(/"/g, '""')}",
               ADD CONSTRAINT ${ident(`${this.names[1].slice(0, 40)}_state_v2`, 'table')} CHECK (state IN ('claimed', 'completed', 'released')) NOT VALID`,
      );
    }
  }

  private async createPendingTable(client: PoolClient): Promise<void> {
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${this.pendingTable} (
             job_id text PRIMARY KEY,
             since_ms bigint NOT NULL,
             user_parameters jsonb
           )`,
    );
  }

  /**
   * The indexes (purgeExpired() walks expires_at's; listPending since_ms's), looked up
   * first: CREATE INDEX IF NOT EXISTS takes a SHARE lock on the table before it finds
   * the index there, so it would wait for every open write transaction (a
   * transactional handler's) and hold up every claim behind it on each start.
   */
  private async createIndexes(client: PoolClient): Promise<void> {
    const indexes = await client.query<{ indexname: string }>(
      `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexname = ANY($2)`,
      [this.names[0], [this.indexNames.jobs, this.indexNames.pending]],
    );
    const present = new Set(indexes.rows.map((r) => r.indexname));
    if (!present.has(this.indexNames.jobs))
      await client.query(`CREATE INDEX IF NOT EXISTS ${this.index} ON ${this.table} (expires_at)`);
    if (!present.has(this.indexNames.pending))
      await client.query(
        `CREATE INDEX IF NOT EXISTS ${this.pendingIndex} ON ${this.pendingTable} (since_ms)`,
      );
  }

  /** The statement parameter that stands for "now": the store's clock when given (tests), else NULL (the server's). */
  private clock(): Date | null {
    return this.now === undefined ? null : new Date(this.now());
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const { leaseMs, token, graceMs } = claimArgs(jobId, options);
    return this.run('claim', async (pool) => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const taken = await this.take(pool, jobId, token, leaseMs, graceMs);
        const row = taken.rows[0];
        if (row !== undefined)
          return {
            status: 'acquired',
            token,
            fence: Number(row.fence),
            ...(row.took_over ? { tookOver: true } : {}),
          };
        const seen = await this.look(pool, jobId, graceMs);
        const found = seen.rows[0];
        if (found === undefined || found.state === 'released') continue; // removed or released meanwhile
        if (found.wait_ms !== null) {
          if (Number(found.wait_ms) > 0)
            return { status: 'in_progress', retryAfterMs: Number(found.wait_ms), stale: true };
          continue; // the grace is over: take it
        }
        if (Number(found.left_ms) <= 0) continue; // expired meanwhile
        if (found.state === 'completed') return { status: 'completed' };
        return { status: 'in_progress', retryAfterMs: Number(found.left_ms) };
      }
      return { status: 'in_progress' };
    });
  }

  /** The claim's first statement: takes the job when it may be taken; a row only then. */
  private take(pool: Pool, jobId: string, token: string, leaseMs: number, graceMs: number) {
    // Taken when the row is absent, held by this token (same fencing number, same
    // took_over), released (took_over: the release's taint while it is kept), completed
    // past its retention, or another token's claim whose lease ran out at least graceMs
    // after a claim first found it so (stale_at; a mark made before the lease end, which
    // a renewal by an earlier version can leave, does not count), or that nobody marked
    // within the grace window after its lease end. A new holder's fencing number is the
    // sequence's next, and more than the row's. It is drawn only when the job is taken:
    // a row the statement's snapshot shows is updated (its number evaluated only when
    // the WHERE lets it through), an absent one inserted. A row inserted meanwhile by
    // another claim is left to it (nothing returned: the row is read below); one deleted
    // meanwhile (a purge) is not updated, and the next attempt inserts it.
    return pool.query<{ fence: string; took_over: boolean }>(
      `WITH c AS (SELECT coalesce($5::timestamptz, statement_timestamp()) AS now),
       there AS (SELECT EXISTS (SELECT 1 FROM ${this.table} WHERE job_id = $1) AS present),
       up AS (
         UPDATE ${this.table} AS t SET token = $2, state = 'claimed', expires_at = (SELECT now FROM c) + $3 * interval '1 millisecond', stale_at = NULL,
             fence = CASE WHEN t.state = 'claimed' AND t.token = $2 THEN t.fence ELSE greatest(nextval('${this.fenceSeq}'), t.fence + 1) END,
             took_over = CASE WHEN t.state = 'claimed' AND t.token = $2 THEN t.took_over
                              WHEN t.state = 'claimed' THEN true
                              WHEN t.state = 'released' AND t.expires_at > (SELECT now FROM c) THEN t.took_over
                              ELSE false END
          WHERE t.job_id = $1
            AND ((t.state = 'claimed' AND t.token = $2)
              OR t.state = 'released'
              OR (t.expires_at <= (SELECT now FROM c)
                  AND (t.state = 'completed' OR $4 = 0
                       OR (t.stale_at >= t.expires_at AND t.stale_at <= (SELECT now FROM c) - $4 * interval '1 millisecond')
                       OR ((t.stale_at IS NULL OR t.stale_at < t.expires_at) AND t.expires_at <= (SELECT now FROM c) - $6 * interval '1 millisecond'))))
          RETURNING t.fence, t.took_over),
       ins AS (
         INSERT INTO ${this.table} (job_id, token, state, expires_at, stale_at, fence, took_over)
           SELECT $1, $2, 'claimed', c.now + $3 * interval '1 millisecond', NULL, nextval('${this.fenceSeq}'), false FROM c, there WHERE NOT there.present
         ON CONFLICT (job_id) DO NOTHING
         RETURNING fence, took_over)
       SELECT fence, took_over FROM up UNION ALL SELECT fence, took_over FROM ins`,
      [jobId, token, leaseMs, graceMs, this.clock(), GRACE_WINDOW_MS],
    );
  }

  /** The claim's second statement, when the first took nothing: what holds the job, and the grace it starts. */
  private look(pool: Pool, jobId: string, graceMs: number) {
    // Not taken: a live claim, a completion, or another token's lease over but within
    // the grace (the first claim to find it so, within the grace window, starts the grace).
    return pool.query<{ state: string; left_ms: string; wait_ms: string | null }>(
      `WITH c AS (SELECT coalesce($3::timestamptz, statement_timestamp()) AS now),
       marked AS (
         UPDATE ${this.table} SET stale_at = CASE WHEN stale_at >= expires_at THEN stale_at ELSE (SELECT now FROM c) END
          WHERE job_id = $1 AND $2 > 0 AND state = 'claimed' AND expires_at <= (SELECT now FROM c)
            AND (stale_at >= expires_at OR expires_at > (SELECT now FROM c) - $4 * interval '1 millisecond')
          RETURNING job_id, stale_at)
       SELECT t.state, ceil(extract(epoch FROM (t.expires_at - c.now)) * 1000) AS left_ms,
              ceil($2 - extract(epoch FROM (c.now - m.stale_at)) * 1000) AS wait_ms
         FROM c, ${this.table} t LEFT JOIN marked m USING (job_id) WHERE t.job_id = $1`,
      [jobId, graceMs, this.clock(), GRACE_WINDOW_MS],
    );
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<RenewReply> {
    const { leaseMs, fence } = renewArgs(jobId, token, options);
    return this.run('renew', async (pool) => {
      // Held by this token (lapsed or not), or gone (kept no longer than a lapsed claim
      // is): the lease is back. Otherwise (another token's claim, a release, a completion)
      // nothing changes, and the row says why, read by a statement of its own: one that
      // waited for the row (this token's transactional completion, until its COMMIT) reads
      // it as its snapshot, taken before the wait, had it.
      const r = await pool.query<{ renewed: string }>(
        `WITH c AS (SELECT coalesce($5::timestamptz, statement_timestamp()) AS now),
         up AS (
           INSERT INTO ${this.table} AS t (job_id, token, state, expires_at, stale_at, fence, took_over)
             SELECT $1, $2, 'claimed', c.now + $3 * interval '1 millisecond', NULL, coalesce($4::bigint, nextval('${this.fenceSeq}')), false FROM c
           ON CONFLICT (job_id) DO UPDATE SET expires_at = EXCLUDED.expires_at, stale_at = NULL,
               token = EXCLUDED.token, state = 'claimed', fence = CASE WHEN t.state = 'claimed' THEN t.fence ELSE EXCLUDED.fence END,
               took_over = t.state = 'claimed' AND t.took_over
             WHERE (t.state = 'claimed' AND t.token = EXCLUDED.token) OR (t.state <> 'claimed' AND t.expires_at <= (SELECT now FROM c))
           RETURNING 1)
         SELECT count(*) AS renewed FROM up`,
        [jobId, token, leaseMs, fence ?? null, this.clock()],
      );
      if (Number(r.rows[0]!.renewed) === 1) return 'renewed';
      const seen = await pool.query<{ mine: boolean }>(
        `SELECT state = 'completed' AND token = $2 AS mine FROM ${this.table} WHERE job_id = $1`,
        [jobId, token],
      );
      return seen.rows[0]?.mine === true ? 'completed' : 'superseded';
    });
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<CompleteReply> {
    const { retainMs, fence } = completeArgs(jobId, token, options);
    return this.run('complete', async (pool) => {
      // Written when the row is this token's claim (lapsed or not), absent, completed past
      // its retention, released, or another token's claim that lapsed too (then the reply
      // is 'superseded': took_over says the completion superseded a holder, or a release,
      // and is kept for a retry of it). The pending record goes in the same statement,
      // only if the mark was made.
      const r = await pool.query<{ took_over: boolean }>(
        `WITH c AS (SELECT coalesce($5::timestamptz, statement_timestamp()) AS now),
         up AS (
           INSERT INTO ${this.table} AS t (job_id, token, state, expires_at, stale_at, fence, took_over)
             SELECT $1, $2, 'completed', c.now + $3 * interval '1 millisecond', NULL, $4::bigint, false FROM c
           ON CONFLICT (job_id) DO UPDATE SET token = EXCLUDED.token, state = 'completed', expires_at = EXCLUDED.expires_at, stale_at = NULL,
               fence = EXCLUDED.fence,
               took_over = (t.state = 'claimed' AND t.token <> EXCLUDED.token) OR (t.state = 'released' AND t.expires_at > (SELECT now FROM c))
             WHERE (t.state = 'claimed' AND (t.token = EXCLUDED.token OR t.expires_at <= (SELECT now FROM c)))
                OR t.state = 'released'
                OR (t.state = 'completed' AND t.expires_at <= (SELECT now FROM c))
           RETURNING job_id, took_over),
         gone AS (DELETE FROM ${this.pendingTable} WHERE job_id IN (SELECT job_id FROM up))
         SELECT took_over FROM up`,
        [jobId, token, retainMs, fence ?? 0, this.clock()],
      );
      const row = r.rows[0];
      if (row !== undefined) return row.took_over ? 'superseded' : 'completed';
      // Not written: a live claim of another token, or a completion (by this token, by
      // a version that kept no token, or by another token). This token's own completion
      // retried gets the same reply again (superseded when took_over says so).
      const seen = await pool.query<{ state: string; token: string | null; took_over: boolean }>(
        `SELECT state, token, took_over FROM ${this.table} WHERE job_id = $1`,
        [jobId],
      );
      const now = seen.rows[0];
      if (now?.state === 'completed' && (now.token === null || now.token === token)) {
        await pool.query(`DELETE FROM ${this.pendingTable} WHERE job_id = $1`, [jobId]);
        return now.token !== null && now.took_over ? 'superseded' : 'completed';
      }
      return 'superseded';
    });
  }

  /**
   * Waits (up to the operation deadline) for a place among the open transactions: the
   * pool's size minus a quarter of it (at least one connection) kept for the store's own
   * operations. Past the deadline: STORE_UNAVAILABLE (503, the gateway retries).
   */
  private async transactionSlot(): Promise<void> {
    const max = Math.max(
      1,
      ((this.pool as { options?: { max?: number } }).options?.max ?? 10) -
        Math.max(1, Math.floor(((this.pool as { options?: { max?: number } }).options?.max ?? 10) / 4)),
    );
    if (this.openTransactions < max) {
      this.openTransactions++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const wake = () => {
        clearTimeout(timer);
        this.openTransactions++;
        resolve();
      };
      const timer = setTimeout(() => {
        const at = this.slotWaiters.indexOf(wake);
        if (at >= 0) this.slotWaiters.splice(at, 1);
        reject(
          new StoreUnavailableError(
            `PostgreSQL: ${max} transactions are open (the pool's size minus what the store keeps for its own operations) and none ended within ${this.timeoutMs} ms; raise the pool's max.`,
          ),
        );
      }, this.timeoutMs);
      this.slotWaiters.push(wake);
    });
  }

  /**
   * Resolves when PostgreSQL answers within the operation deadline and the store's tables
   * are there (with `migrate: true`, once it created them); rejects with
   * STORE_NOT_MIGRATED naming what is missing, or STORE_UNAVAILABLE naming the server and
   * the cause (connection refused, authentication, timeout). The store starts it at
   * construction and logs a failure; await it at start to fail fast instead.
   *
   * @example
   * ```ts
   * const store = new PostgresIdempotencyStore({ connectionString: process.env.DATABASE_URL! });
   * await store.ready(); // throws StoreNotMigratedError until migrate() has run on this database
   * ```
   */
  async ready(): Promise<void> {
    await this.run('ping', async (pool) => {
      const missing = await checkSchema(pool, this.backend, this.relations());
      if (missing !== undefined) throw missing;
    });
  }

  /** The same check as `ready()`, for readiness probes (`receiver.health()` reports its failure). */
  async ping(): Promise<void> {
    await this.ready();
  }

  private relations(): StoreRelations {
    return {
      schema: this.names[0],
      table: this.names[1],
      jobs: this.table,
      pending: this.pendingTable,
      fence: this.fenceSeq,
    };
  }

  async release(jobId: string, token: string, options?: ReleaseOptions): Promise<boolean> {
    const { tainted } = releaseArgs(jobId, token, options);
    return this.run('release', async (pool) => {
      // Kept as released (took_over: its taint, or the caller's) for LAPSED_CLAIM_KEEP_MS: a
      // late renewal or completion of this token is then superseded, and the next claim
      // inherits the taint.
      const r = await pool.query(
        `UPDATE ${this.table} SET state = 'released', expires_at = coalesce($4::timestamptz, statement_timestamp()) + $3 * interval '1 millisecond', stale_at = NULL,
                took_over = took_over OR $5
          WHERE job_id = $1 AND token = $2 AND state = 'claimed'`,
        [jobId, token, LAPSED_CLAIM_KEEP_MS, this.clock(), tainted],
      );
      return r.rowCount === 1;
    });
  }

  /**
   * With `transactional: true`: a transaction on a connection of its own for the holder
   * of `jobId`'s claim (the receivers call it; your handler gets `client`). Its
   * `complete` writes the completion inside it, only while `token` still holds the claim
   * with `fence`; `commit` makes the handler's writes and the completion durable at once.
   */
  async begin(
    jobId: string,
    token: string,
    options: { fence: number; leaseMs?: number },
  ): Promise<StoreTransaction<PoolClient>> {
    checkJobId(jobId);
    checkToken(token);
    if (!this.transactional) throw new TypeError('begin() needs a store made with transactional: true');
    const idleMs =
      options.leaseMs === undefined
        ? undefined
        : Math.ceil(checkMs(options.leaseMs, 'leaseMs')) + TRANSACTION_IDLE_MARGIN_MS;
    // A place among the transactions this pool can hold open beside the store's own
    // operations (claims, renewals): without it, handlers holding every connection would
    // leave none for the renewals that keep their own leases.
    await this.transactionSlot();
    const freeSlot = this.slotFreer();
    // A checked-out client has no listener of the pool's: without one, a connection the
    // server ends while the handler works (a restart, idle_in_transaction_session_timeout)
    // would throw from its 'error' event and end the process. Its next query fails instead.
    const onError = (): void => undefined;
    const { client, xid } = await this.connectInTransaction(onError, freeSlot, idleMs);
    return this.transactionOn(client, onError, freeSlot, { jobId, token, fence: options.fence, xid });
  }

  /** Gives the place `transactionSlot()` took back to the next waiter, once (later calls do nothing). */
  private slotFreer(): () => void {
    let slotHeld = true;
    return () => {
      if (!slotHeld) return;
      slotHeld = false;
      this.openTransactions--;
      this.slotWaiters.shift()?.();
    };
  }

  /**
   * A connection of the pool with its transaction begun, within the operation deadline
   * (else the slot is freed), and the transaction's id (to tell whether the handler ended
   * it). `idleMs`: how long the server lets it sit idle before ending it.
   */
  private async connectInTransaction(
    onError: () => void,
    freeSlot: () => void,
    idleMs: number | undefined,
  ): Promise<{ client: PoolClient; xid: string }> {
    // Set when the deadline passed: a connection or a BEGIN that arrives later is not
    // returned to anyone, and must not stay checked out (with its transaction open).
    let abandoned = false;
    return this.run('begin', async (pool) => {
      const c = await pool.connect();
      c.on('error', onError);
      // The handler's statements are its own: no client-side cut at the store's operation
      // timeout (a pool made from connectionString has one); the lease, the handler's
      // deadline and the server's own limits govern them. Restored when it goes back.
      liftQueryTimeout(c);
      const giveBack = (err?: Error) => {
        c.removeListener('error', onError);
        restoreQueryTimeout(c);
        c.release(err);
      };
      if (abandoned) {
        giveBack();
        throw new StoreUnavailableError('PostgreSQL: begin was given up before a connection was free');
      }
      let xid: string;
      try {
        // READ COMMITTED whatever the database's default: the lease renewals update the job's row while
        // the handler runs, which a REPEATABLE READ or SERIALIZABLE transaction could never complete after.
        // The handler's phase is bounded on the server: a holder cut off from it (its socket silent, the
        // session kept) would otherwise keep the rows it wrote locked, and every takeover would wait on them.
        const results = (await c.query(
          `BEGIN ISOLATION LEVEL READ COMMITTED;${idleMs === undefined ? '' : ` SET LOCAL idle_in_transaction_session_timeout = ${idleMs};`} SELECT txid_current()::text AS xid`,
        )) as unknown as Array<{ rows: Array<{ xid?: string }> }>;
        xid = results[results.length - 1]!.rows[0]!.xid!;
      } catch (err) {
        giveBack(err as Error);
        throw err;
      }
      if (abandoned) {
        // Its transaction is open: the connection is closed rather than pooled.
        giveBack(new Error('begin was given up'));
        throw new StoreUnavailableError('PostgreSQL: begin was given up before the transaction began');
      }
      return { client: c, xid };
    }).catch((err: unknown) => {
      abandoned = true;
      freeSlot();
      throw err;
    });
  }

  /** The transaction `begin` gives: the completion written inside it, then one COMMIT or ROLLBACK, after which the connection goes back. */
  private transactionOn(
    client: PoolClient,
    onError: () => void,
    freeSlot: () => void,
    claim: TransactionClaim,
  ): StoreTransaction<PoolClient> {
    let open = true;
    const end = async (sql: 'COMMIT' | 'ROLLBACK'): Promise<void> => {
      if (!open) return;
      open = false;
      let failure: unknown;
      try {
        await this.run(sql === 'COMMIT' ? 'commit' : 'rollback', () => client.query(sql));
      } catch (err) {
        failure = err;
      }
      // A connection whose transaction ended in doubt is not given back to the pool.
      client.removeListener('error', onError);
      restoreQueryTimeout(client);
      client.release(failure instanceof Error ? failure : undefined);
      freeSlot();
      if (failure !== undefined) throw failure;
    };
    return {
      client,
      complete: async ({ retainMs }) => {
        checkMs(retainMs, 'retainMs');
        return this.run('complete', () => this.completeIn(client, claim, retainMs));
      },
      commit: () => end('COMMIT'),
      rollback: () => end('ROLLBACK'),
      // A statement restarts the server's idle clock. Only while the connection is idle
      // (a statement of the handler's running or queued keeps the session busy anyway), and
      // never after the COMMIT or ROLLBACK (sent once `open` is false).
      keepAlive: () => {
        if (open && !busy(client)) client.query('SELECT 1').catch(() => undefined);
      },
    };
  }

  /**
   * The completion, inside the handler's transaction: written only while the claim (token
   * and fence) still holds, and only in the transaction `begin` opened. A handler that
   * ended it (COMMIT or ROLLBACK on its client) left the connection outside it, where the
   * completion would be written on its own: refused with 25P01 (no active transaction),
   * `ended` saying how it ended.
   */
  private async completeIn(
    client: PoolClient,
    { jobId, token, fence, xid }: TransactionClaim,
    retainMs: number,
  ): Promise<CompleteReply> {
    // A holder cut off from the server between here and COMMIT must not keep the
    // row locked (takers would wait for TCP keepalives): the server ends it sooner.
    const check = await client.query<{ xid: string | null; status: string | null }>(
      `SELECT set_config('idle_in_transaction_session_timeout', $1, true), txid_current_if_assigned()::text AS xid, txid_status($2::bigint) AS status`,
      [String(this.timeoutMs), xid],
    );
    const now = check.rows[0];
    if (now?.xid !== xid) {
      const ended = now?.status === 'committed' ? 'COMMIT' : 'ROLLBACK';
      throw Object.assign(
        new Error(
          `the transaction jobhook began for job ${jobId} was ended (${ended}) before its completion`,
        ),
        { code: '25P01', ended },
      );
    }
    const r = await client.query(
      `WITH c AS (SELECT coalesce($5::timestamptz, statement_timestamp()) AS now),
             up AS (
               UPDATE ${this.table} SET state = 'completed', expires_at = (SELECT now FROM c) + $3 * interval '1 millisecond', stale_at = NULL, took_over = false
                WHERE job_id = $1 AND state = 'claimed' AND token = $2 AND fence = $4
                RETURNING job_id),
             gone AS (DELETE FROM ${this.pendingTable} WHERE job_id IN (SELECT job_id FROM up))
             SELECT count(*) AS n FROM up`,
      [jobId, token, retainMs, fence, this.clock()],
    );
    return Number((r.rows[0] as { n: string }).n) === 1 ? 'completed' : 'superseded';
  }

  async trackPending(jobId: string, options: TrackPendingOptions = {}): Promise<void> {
    const { since, userParameters: params } = trackArgs(jobId, options);
    await this.run('trackPending', (pool) =>
      pool.query(
        `INSERT INTO ${this.pendingTable} (job_id, since_ms, user_parameters) VALUES ($1, $2, $3)
         ON CONFLICT (job_id) DO UPDATE SET since_ms = EXCLUDED.since_ms, user_parameters = EXCLUDED.user_parameters`,
        [jobId, since, params === undefined ? null : JSON.stringify(params)],
      ),
    );
  }

  async listPending(options: ListPendingOptions): Promise<PendingJob[]> {
    const { before, limit } = listArgs(options);
    return this.run('listPending', async (pool) => {
      const r = await pool.query<{
        job_id: string;
        since_ms: string;
        user_parameters: JsonObjectValue | null;
      }>(
        `SELECT job_id, since_ms, user_parameters FROM ${this.pendingTable} WHERE since_ms <= $1 ORDER BY since_ms, job_id LIMIT $2`,
        [before, limit],
      );
      return r.rows.map((row) => ({
        jobId: row.job_id,
        since: Number(row.since_ms),
        ...(row.user_parameters === null ? {} : { userParameters: row.user_parameters }),
      }));
    });
  }

  async forgetPending(jobId: string): Promise<void> {
    checkJobId(jobId);
    await this.run('forgetPending', (pool) =>
      pool.query(`DELETE FROM ${this.pendingTable} WHERE job_id = $1`, [jobId]),
    );
  }

  async deferPending(jobId: string, options: DeferPendingOptions): Promise<void> {
    const { since } = deferArgs(jobId, options);
    await this.run('deferPending', (pool) =>
      pool.query(`UPDATE ${this.pendingTable} SET since_ms = $2 WHERE job_id = $1`, [jobId, since]),
    );
  }

  /**
   * Deletes completed marks past their retention, releases past their keep, and claims
   * LAPSED_CLAIM_KEEP_MS (24 h) past their lease (or past the takeover grace's mark), so
   * a delivery or the reconciler coming later still finds a lapsed claim and reports its
   * takeover; returns how many rows went. Schedule it (e.g. hourly).
   *
   * One cutoff for the whole purge (the store's clock, else the server's at the first
   * statement); rows go in batches of `batchSize` (default 1,000), one statement each,
   * oldest first, until a batch comes back short. Each statement walks the `expires_at`
   * index from where the previous one stopped, so its cost follows the rows it deletes,
   * and it skips rows a claim holds locked (the next purge takes them) instead of waiting.
   * A batch that fails throws; the batches before it stay deleted.
   *
   * @example
   * ```ts
   * setInterval(() => store.purgeExpired({ batchSize: 1000 }).catch(console.error), 3_600_000).unref();
   * ```
   */
  async purgeExpired(options: PurgeOptions = {}): Promise<number> {
    checkOptionNames(options, PURGE_OPTIONS);
    const batchSize = optionalNumber(options?.batchSize, 'batchSize', 1000, { integer: true, max: 100_000 });
    // $1 the cutoff (NULL: the server's clock, read once by the first statement and
    // passed to the next ones as it came back), $2 how long a lapsed claim is kept, $3
    // where the previous batch stopped in expires_at order, $4 the batch size.
    const now = `date_trunc('milliseconds', coalesce($1::timestamptz, statement_timestamp()))`;
    // The rows are picked (and locked) by the inner SELECT and deleted by their ctid (a
    // TID scan). Joined by job_id instead, with the range condition repeated outside,
    // the planner hashed every row of the range once a backlog was there (80 ms a batch
    // at 10^6 rows): outside, nothing an index could serve. A row updated after the
    // statement's snapshot has a ctid that snapshot cannot see: it stays, for the next
    // purge; the rule is checked again on the row deleted.
    const sql = `WITH gone AS (
         DELETE FROM ${this.table} t
          WHERE t.ctid = ANY (ARRAY(
                  SELECT t.ctid FROM ${this.table} t
                   WHERE t.expires_at <= ${now} AND t.expires_at >= $3::timestamptz AND ${purgeable(now, '$2')}
                   ORDER BY t.expires_at LIMIT $4
                   FOR UPDATE SKIP LOCKED))
            AND ${purgeable(now, '$2')}
         RETURNING t.expires_at)
       SELECT count(*)::int AS n, date_trunc('milliseconds', max(expires_at)) AS last, ${now} AS cutoff FROM gone`;
    let cutoff: Date | null = this.clock();
    let from: Date | string = '-infinity';
    let total = 0;
    for (;;) {
      const r = await this.run('purgeExpired', (pool) =>
        pool.query<{ n: number; last: Date | null; cutoff: Date }>(sql, [
          cutoff,
          LAPSED_CLAIM_KEEP_MS,
          from,
          batchSize,
        ]),
      );
      const { n, last, cutoff: used } = r.rows[0]!;
      total += n;
      if (n < batchSize || last === null) return total;
      cutoff = used;
      // Rows at `last` the rule keeps are scanned again; everything before it is done.
      from = last;
    }
  }

  /** Ends the pool if the store created it (from `connectionString`); a pool you passed is left to you. */
  async close(): Promise<void> {
    this.probe.close();
    if (!this.owned) return;
    await this.pool.end().catch(() => undefined);
  }
}

/** The names of {@link PostgresStoreOptions}. */
export const POSTGRES_STORE_OPTIONS = {
  pool: true,
  connectionString: true,
  table: true,
  schema: true,
  operationTimeoutMs: true,
  transactional: true,
  migrate: true,
  log: true,
  now: true,
} as const satisfies OptionNamesOf<PostgresStoreOptions>;
/** `purgeExpired()` of the PostgreSQL store. */
export const PURGE_OPTIONS = { batchSize: true } as const satisfies OptionNamesOf<PurgeOptions>;

/** The pool-wide `query_timeout` of connections lent to handlers' transactions, to restore. */
const liftedTimeouts = new WeakMap<object, number | undefined>();

type TimedClient = { connectionParameters?: { query_timeout?: number } };

/** Takes the pool's `query_timeout` off a connection while a handler's transaction has it. */
function liftQueryTimeout(client: PoolClient): void {
  const params = (client as unknown as TimedClient).connectionParameters;
  if (params === undefined || liftedTimeouts.has(client)) return;
  liftedTimeouts.set(client, params.query_timeout);
  params.query_timeout = undefined;
}

/** Gives a connection its `query_timeout` back before it returns to the pool. */
function restoreQueryTimeout(client: PoolClient): void {
  const params = (client as unknown as TimedClient).connectionParameters;
  if (params === undefined || !liftedTimeouts.has(client)) return;
  params.query_timeout = liftedTimeouts.get(client);
  liftedTimeouts.delete(client);
}

/**
 * A transactional store's pool must hold a handler's transaction and, beside it, the
 * connection its lease renewals use: at least 2 connections.
 */
function checkPoolSize(pool: Pool): void {
  const max = (pool as { options?: { max?: number } }).options?.max ?? 10;
  if (max < 2)
    throw new TypeError(
      `a transactional PostgreSQL store needs a pool of at least 2 connections (one for a handler's transaction, one for the lease renewals beside it); this pool has max ${max}: raise max to 2 or more (max / 4 of it is kept for the store's own statements)`,
    );
}
