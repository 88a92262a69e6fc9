import type { Pool, PoolConfig } from 'pg';
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
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

function ident(value: string, what: string): string {
  if (!IDENTIFIER.test(value)) throw new TypeError(`${what} must be a plain SQL identifier (letters, digits, _); got ${JSON.stringify(value)}`);
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
 * setInterval(() => store.purgeExpired().catch(console.error), 3_600_000).unref();
 * app.post('/webhooks/gateway', webhookReceiver({ publicKey, store, onEvent }));
 * ```
 */
export class PostgresIdempotencyStore implements PendingStore {
  private readonly pool: Pool;
  private readonly owned: boolean;
  private readonly table: string;
  /** Schema and table as written (for the catalog). */
  private readonly names: [string, string];
  private readonly pendingTable: string;
  private readonly pendingIndex: string;
  private readonly index: string;
  private readonly lockKey: string;
  private readonly timeoutMs: number;

  constructor(options: PostgresStoreOptions) {
    if ((options?.pool === undefined) === (options?.connectionString === undefined)) {
      throw new TypeError('PostgresIdempotencyStore needs exactly one of pool or connectionString');
    }
    const schema = options.schema ?? 'public';
    const table = options.table ?? 'jobhook_jobs';
    this.table = `${ident(schema, 'schema')}.${ident(table, 'table')}`;
    this.names = [schema, table];
    this.index = ident(`${table.slice(0, 50)}_expires_at`, 'table');
    this.pendingTable = `${ident(schema, 'schema')}.${ident(`${table.slice(0, 54)}_pending`, 'table')}`;
    this.pendingIndex = ident(`${table.slice(0, 50)}_pending_since`, 'table');
    this.lockKey = `jobhook:${schema}.${table}`;
    this.timeoutMs = optionalNumber(options.operationTimeoutMs, 'operationTimeoutMs', 5000);
    this.owned = options.pool === undefined;
    this.pool = options.pool ?? this.connect(options.connectionString!);
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
    return guarded('PostgreSQL', operation, this.timeoutMs, () => fn(this.pool));
  }

  /** Creates the table and its index if missing. Concurrent calls are serialised by an advisory lock. */
  async migrate(): Promise<void> {
    await this.run('migrate', async (pool) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [this.lockKey]);
        await client.query(
          `CREATE TABLE IF NOT EXISTS ${this.table} (
             job_id text PRIMARY KEY,
             token text,
             state text NOT NULL CHECK (state IN ('claimed', 'completed')),
             expires_at timestamptz NOT NULL,
             stale_at timestamptz
           )`,
        );
        // Tables made by an earlier version: the takeover grace's column (looked up first,
        // so a table that has it is not locked by ALTER TABLE on every start).
        const has = await client.query(
          `SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = 'stale_at'`,
          this.names,
        );
        if (has.rowCount === 0) await client.query(`ALTER TABLE ${this.table} ADD COLUMN IF NOT EXISTS stale_at timestamptz`);
        await client.query(`CREATE INDEX IF NOT EXISTS ${this.index} ON ${this.table} (expires_at)`);
        await client.query(
          `CREATE TABLE IF NOT EXISTS ${this.pendingTable} (
             job_id text PRIMARY KEY,
             since_ms bigint NOT NULL,
             user_parameters jsonb
           )`,
        );
        await client.query(`CREATE INDEX IF NOT EXISTS ${this.pendingIndex} ON ${this.pendingTable} (since_ms)`);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    });
  }

  /**
   * Takes the job when its row is absent, held by `token`, completed past its retention,
   * or another token's claim whose lease ran out at least `graceMs` after a claim first
   * found it so (`stale_at`; a mark made before the lease end, which a renewal by an
   * earlier version can leave, does not count): one statement for claim and renew.
   * Resolves the token when taken.
   */
  private take(pool: Pool, jobId: string, token: string, leaseMs: number, graceMs: number) {
    return pool.query(
      `INSERT INTO ${this.table} AS t (job_id, token, state, expires_at, stale_at)
         VALUES ($1, $2, 'claimed', clock_timestamp() + $3 * interval '1 millisecond', NULL)
       ON CONFLICT (job_id) DO UPDATE SET token = EXCLUDED.token, state = 'claimed', expires_at = EXCLUDED.expires_at, stale_at = NULL
         WHERE (t.state = 'claimed' AND t.token = EXCLUDED.token)
            OR (t.expires_at <= clock_timestamp()
                AND (t.state = 'completed' OR $4 = 0
                     OR (t.stale_at >= t.expires_at AND t.stale_at <= clock_timestamp() - $4 * interval '1 millisecond')))
       RETURNING token`,
      [jobId, token, leaseMs, graceMs],
    );
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const { leaseMs, token, graceMs } = claimArgs(jobId, options);
    return this.run('claim', async (pool) => {
      for (let attempt = 0; attempt < 3; attempt++) {
        if ((await this.take(pool, jobId, token, leaseMs, graceMs)).rowCount === 1) return { status: 'acquired', token };
        // Not taken: a live claim, a completion, or another token's lease over but within
        // the grace (the first claim to find it so starts the grace).
        const seen = await pool.query<{ state: string; left_ms: string; wait_ms: string | null }>(
          `WITH marked AS (
             UPDATE ${this.table} SET stale_at = CASE WHEN stale_at >= expires_at THEN stale_at ELSE clock_timestamp() END
              WHERE job_id = $1 AND $2 > 0 AND state = 'claimed' AND expires_at <= clock_timestamp()
              RETURNING job_id, stale_at)
           SELECT t.state, ceil(extract(epoch FROM (t.expires_at - clock_timestamp())) * 1000) AS left_ms,
                  ceil($2 - extract(epoch FROM (clock_timestamp() - m.stale_at)) * 1000) AS wait_ms
             FROM ${this.table} t LEFT JOIN marked m USING (job_id) WHERE t.job_id = $1`,
          [jobId, graceMs],
        );
        const row = seen.rows[0];
        if (row === undefined) continue; // removed meanwhile
        if (row.wait_ms !== null) {
          if (Number(row.wait_ms) > 0) return { status: 'in_progress', retryAfterMs: Number(row.wait_ms), stale: true };
          continue; // the grace is over: take it
        }
        if (Number(row.left_ms) <= 0) continue; // expired meanwhile
        if (row.state === 'completed') return { status: 'completed' };
        return { status: 'in_progress', retryAfterMs: Number(row.left_ms) };
      }
      return { status: 'in_progress' };
    });
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<boolean> {
    const { leaseMs } = renewArgs(jobId, token, options);
    return this.run('renew', async (pool) => (await this.take(pool, jobId, token, leaseMs, 0)).rowCount === 1);
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<boolean> {
    const { retainMs } = completeArgs(jobId, token, options);
    return this.run('complete', async (pool) => {
      // One statement each: the mark, and the pending record gone only if the mark was made.
      // The usual case (the claim is still ours) is a plain UPDATE; an upsert only when it is not.
      const mark = (upsert: boolean) =>
        pool.query<{ done: string }>(
          `WITH up AS (${
            upsert
              ? `INSERT INTO ${this.table} AS t (job_id, token, state, expires_at)
                   VALUES ($1, NULL, 'completed', clock_timestamp() + $3 * interval '1 millisecond')
                 ON CONFLICT (job_id) DO UPDATE SET token = NULL, state = 'completed', expires_at = EXCLUDED.expires_at
                   WHERE t.state = 'completed' OR t.token = $2 OR t.expires_at <= clock_timestamp()
                 RETURNING job_id`
              : `UPDATE ${this.table} SET token = NULL, state = 'completed', expires_at = clock_timestamp() + $3 * interval '1 millisecond'
                   WHERE job_id = $1 AND token = $2 RETURNING job_id`
          }), gone AS (DELETE FROM ${this.pendingTable} WHERE job_id IN (SELECT job_id FROM up))
           SELECT count(*) AS done FROM up`,
          [jobId, token, retainMs],
        );
      if (Number((await mark(false)).rows[0]?.done) === 1) return true;
      return Number((await mark(true)).rows[0]?.done) === 1;
    });
  }

  async release(jobId: string, token: string): Promise<boolean> {
    releaseArgs(jobId, token);
    return this.run('release', async (pool) => {
      const r = await pool.query(`DELETE FROM ${this.table} WHERE job_id = $1 AND token = $2 AND state = 'claimed'`, [jobId, token]);
      return r.rowCount === 1;
    });
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
      const r = await pool.query<{ job_id: string; since_ms: string; user_parameters: JsonObjectValue | null }>(
        `SELECT job_id, since_ms, user_parameters FROM ${this.pendingTable} WHERE since_ms <= $1 ORDER BY since_ms, job_id LIMIT $2`,
        [before, limit],
      );
      return r.rows.map((row) => ({ jobId: row.job_id, since: Number(row.since_ms), ...(row.user_parameters === null ? {} : { userParameters: row.user_parameters }) }));
    });
  }

  async forgetPending(jobId: string): Promise<void> {
    checkJobId(jobId);
    await this.run('forgetPending', (pool) => pool.query(`DELETE FROM ${this.pendingTable} WHERE job_id = $1`, [jobId]));
  }

  async deferPending(jobId: string, options: DeferPendingOptions): Promise<void> {
    const { since } = deferArgs(jobId, options);
    await this.run('deferPending', (pool) => pool.query(`UPDATE ${this.pendingTable} SET since_ms = $2 WHERE job_id = $1`, [jobId, since]));
  }

  /**
   * Deletes completed marks past their retention, and claims a minute past their lease
   * (or past the takeover grace's mark), so a purge never cuts a grace short; returns how
   * many rows went. Schedule it (e.g. hourly).
   */
  async purgeExpired(): Promise<number> {
    return this.run('purgeExpired', async (pool) => {
      const r = await pool.query(
        `DELETE FROM ${this.table} WHERE expires_at <= clock_timestamp()
           AND (state = 'completed' OR greatest(expires_at, stale_at) <= clock_timestamp() - $1 * interval '1 millisecond')`,
        [LAPSED_CLAIM_KEEP_MS],
      );
      return r.rowCount ?? 0;
    });
  }

  /** Ends the pool if the store created it (from `connectionString`); a pool you passed is left to you. */
  async close(): Promise<void> {
    if (!this.owned) return;
    await this.pool.end().catch(() => undefined);
  }
}
