import { StoreNotMigratedError, StoreUnavailableError } from '../base/errors.js';
import { resolveLogger, type LoggerInput } from '../base/log.js';
import { checkOptionNames, optionalNumber, type OptionNamesOf } from '../base/options.js';
import type { JsonObjectValue } from '../core/event.js';
import {
  transition,
  type CompleteReply,
  type JobReply,
  type JobRequest,
  type RenewReply,
} from '../jobs/model.js';
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
  type ReleaseOptions,
  type RenewOptions,
  type StoreTransaction,
  type TrackPendingOptions,
  type TransactionalStore,
} from '../jobs/store.js';
import { firstUse, StoreProbe } from './diagnose.js';
import {
  loadSqlite,
  SQLITE,
  sqliteCode,
  type SqliteConnection,
  type SqliteOpener,
  type SqliteValue,
} from './sqlite-driver.js';
import {
  checkSqliteSchema,
  configure,
  recordOf,
  rowOf,
  schema,
  sqliteFailure,
  sqliteNames,
  sqliteNotMigrated,
  type JobRow,
  type SqliteNames,
} from './sqlite-schema.js';

export type { SqliteValue } from './sqlite-driver.js';

export interface SqliteStoreOptions {
  /**
   * The database file, created when missing (its directory must exist). Every process on
   * this machine that opens the same file shares the store. A local disk: WAL mode, which
   * the store needs, does not work on network file systems.
   */
  path: string;
  /** Table name (default `jobhook_jobs`; `<table>_pending` and `<table>_meta` beside it). */
  table?: string;
  /**
   * How long an operation waits for the file's write lock, held by another connection
   * (another process's write, a transactional handler), before it fails with
   * STORE_UNAVAILABLE (503: the gateway retries). Default 5,000 ms. The store waits
   * without blocking the event loop.
   */
  busyTimeoutMs?: number;
  /**
   * Exactly-once effects: the handler gets `context.transaction`, a client inside an open
   * write transaction on this file (`run`, `get`, `all`), and the job's completion is
   * written in that same transaction, conditioned on the claim's token and fencing number.
   * jobhook commits once the handler resolved and answers 200 only then. SQLite has one
   * writer per file: while a handler runs, every other write to the file waits (up to
   * `busyTimeoutMs`), so keep such handlers short.
   */
  transactional?: boolean;
  /** Create the tables at first use, as `migrate()` does (safe with other processes migrating at once). Default false. */
  migrate?: boolean;
  /** Where the store tells what is wrong before a delivery fails on it (default: the console; `false`: nothing). */
  log?: LoggerInput;
  /** A clock in epoch ms instead of `Date.now` (tests of the protocol's timing). */
  now?: () => number;
}

/** Options of `purgeExpired()`. */
export interface SqlitePurgeOptions {
  /** Rows deleted per write transaction (default 1,000): each holds the write lock only that long. */
  batchSize?: number;
}

/** What a transactional handler gets as `context.transaction`: statements inside the open transaction. */
export interface SqliteTransactionClient {
  /** Runs one statement (`?` parameters); how many rows it changed. */
  run(sql: string, ...params: SqliteValue[]): { changes: number };
  /** The first row of one statement, or undefined. */
  get(sql: string, ...params: SqliteValue[]): Record<string, SqliteValue> | undefined;
  /** Every row of one statement. */
  all(sql: string, ...params: SqliteValue[]): Array<Record<string, SqliteValue>>;
}

/** An operation waiting for the next write transaction (`write`). */
interface PendingWrite {
  operation: string;
  fn: (c: SqliteConnection) => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** `fn` in a SAVEPOINT of the open transaction: released when it returns, rolled back alone when it throws. */
function savepoint(
  c: SqliteConnection,
  fn: (c: SqliteConnection) => unknown,
): { ok: boolean; value: unknown } {
  c.exec('SAVEPOINT jobhook_op');
  try {
    const value = fn(c);
    c.exec('RELEASE jobhook_op');
    return { ok: true, value };
  } catch (err) {
    c.exec('ROLLBACK TO jobhook_op');
    c.exec('RELEASE jobhook_op');
    return { ok: false, value: err };
  }
}

/** A statement that would end jobhook's transaction (BEGIN, COMMIT, END, ROLLBACK but ROLLBACK TO). */
const ENDS_TRANSACTION = /^\s*(BEGIN|COMMIT|END|ROLLBACK(?!\s+(TRANSACTION\s+)?TO\b))\b/i;

/** An open transaction of `begin()`: its connection and the claim it belongs to. */
interface OpenTransaction {
  connection: SqliteConnection;
  jobId: string;
  token: string;
  fence: number;
  /** Ends the store's write turn it holds. */
  release: () => void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** After the I/O of this turn of the event loop (setImmediate where the runtime has it). */
const nextTurn: (f: () => void) => void =
  typeof setImmediate === 'function' ? (f) => void setImmediate(f) : (f) => void setTimeout(f, 0);

/**
 * Idempotency store on the runtime's own SQLite (`node:sqlite` on Node 22.13+ and Deno,
 * `bun:sqlite` on Bun): durable on one machine without a server, shared by every process
 * that opens the same file. Each operation is one write transaction (`BEGIN IMMEDIATE`)
 * that reads the job's row, applies the claim protocol's own transition
 * (`src/lib/jobs/model.ts`) and writes the result; in WAL mode with `synchronous = FULL`,
 * so a completion is on disk before it is acknowledged. Call `migrate()` once (or pass
 * `migrate: true`) and schedule `purgeExpired()`.
 *
 * @example
 * ```ts
 * import { SqliteIdempotencyStore } from 'jobhook/sqlite';
 *
 * const store = new SqliteIdempotencyStore({ path: '/var/lib/myapp/jobhook.db', migrate: true });
 * setInterval(() => store.purgeExpired().catch(console.error), 3_600_000).unref();
 * app.post('/webhooks/gateway', webhookReceiver({ publicKey, store, onEvent }));
 * ```
 */
export class SqliteIdempotencyStore implements PendingStore, TransactionalStore<SqliteTransactionClient> {
  /** Whether handlers get a transaction in which their job's completion is written (see the option). */
  readonly transactional: boolean;
  private readonly path: string;
  private readonly names: SqliteNames;
  private readonly busyMs: number;
  private readonly now: () => number;
  private readonly openFile: SqliteOpener;
  /** `SQLite at <file>`: in every failure's message. */
  private readonly backend: string;
  private readonly autoMigrate: (() => Promise<void> | undefined) | undefined;
  private readonly probe: StoreProbe;
  private main: SqliteConnection | undefined;
  /** Connections of ended transactions, for the next `begin()`. */
  private readonly idle: SqliteConnection[] = [];
  /** Open transactions by job id and token: a renewal of their claim runs inside them. */
  private readonly transactions = new Map<string, OpenTransaction>();
  private migrateCalls = 0;
  private closed = false;
  /** Operations gathered for the next write transaction (see `write`). */
  private pendingWrites: PendingWrite[] | undefined;
  /** The end of the last write turn taken (see `turn`). */
  private tail: Promise<void> = Promise.resolve();

  constructor(options: SqliteStoreOptions) {
    checkOptionNames(options, SQLITE_STORE_OPTIONS);
    if (typeof options?.path !== 'string' || options.path === '')
      throw new TypeError('SqliteIdempotencyStore needs path: the database file (created when missing)');
    if (options.path === ':memory:' || options.path.startsWith('file::memory:'))
      throw new TypeError(
        'SqliteIdempotencyStore needs a file (an in-memory database is neither durable nor shared): use MemoryIdempotencyStore for that',
      );
    this.path = options.path;
    this.names = sqliteNames(options.table ?? 'jobhook_jobs');
    this.busyMs = optionalNumber(options.busyTimeoutMs, 'busyTimeoutMs', 5000, { min: 0 });
    for (const flag of ['transactional', 'migrate'] as const)
      if (options[flag] !== undefined && typeof options[flag] !== 'boolean')
        throw new TypeError(`${flag} must be true or false`);
    this.transactional = options.transactional === true;
    if (options.now !== undefined && typeof options.now !== 'function')
      throw new TypeError('now must be a function returning epoch milliseconds');
    this.now = options.now ?? Date.now;
    this.openFile = loadSqlite();
    this.backend = `SQLite at ${this.path}`;
    this.autoMigrate = options.migrate === true ? firstUse(() => this.migrate()) : undefined;
    this.probe = new StoreProbe(resolveLogger(options.log));
    // A missing table found while a migrate() runs is that migrate()'s to tell.
    const calls = this.migrateCalls;
    this.probe.start(
      'the SQLite store',
      () => this.ready(),
      (err) => (err as { code?: unknown })?.code === 'STORE_NOT_MIGRATED' && this.migrateCalls > calls,
    );
  }

  /** The store's own connection, opened (and set up) at first use. */
  private connection(operation: string): SqliteConnection {
    if (this.closed) throw new StoreUnavailableError(`${this.backend}: the store was closed`);
    if (this.main !== undefined) return this.main;
    this.main = this.connect(operation, true);
    return this.main;
  }

  private connect(operation: string, first: boolean): SqliteConnection {
    let c: SqliteConnection | undefined;
    try {
      c = this.openFile(this.path);
      configure(c, first);
      return c;
    } catch (err) {
      c?.close();
      if (err instanceof TypeError) throw new StoreUnavailableError(`${this.backend}: ${err.message}`);
      throw sqliteFailure(this.backend, operation, err);
    }
  }

  /**
   * Runs `fn` once `c` holds the file's write lock (`BEGIN IMMEDIATE`), in the same
   * synchronous turn as the BEGIN (nothing else of this process can use `c` in between).
   * This store's writers take turns (first come, first served), so only one of them asks
   * for the lock at a time; while another process holds it, the BEGIN is tried again after
   * short sleeps (the event loop runs meanwhile), in all at most `busyTimeoutMs`.
   */
  private async locked<T>(c: SqliteConnection, fn: () => T): Promise<T> {
    const started = Date.now();
    const release = await this.turn(started);
    try {
      return await this.poll(c, fn, started);
    } finally {
      release();
    }
  }

  /** The BEGIN IMMEDIATE of `locked`, tried until it gets the lock or `busyTimeoutMs` from `started` has passed. */
  private async poll<T>(c: SqliteConnection, fn: () => T, started: number): Promise<T> {
    for (let wait = 1; ; wait = Math.min(wait * 2, 16)) {
      try {
        c.exec('BEGIN IMMEDIATE');
        return fn();
      } catch (err) {
        if (sqliteCode(err) !== SQLITE.BUSY || (err as { inside?: boolean }).inside === true) throw err;
        if (Date.now() - started >= this.busyMs || this.closed) throw this.busy((err as Error).message);
      }
      await sleep(wait / 2 + (Math.random() * wait) / 2);
    }
  }

  /** The error of a write lock not had within busyTimeoutMs (told as SQLITE_BUSY). */
  private busy(message = 'database is locked'): Error {
    return Object.assign(new Error(`${message}: the write lock was not free within ${this.busyMs} ms`), {
      errcode: SQLITE.BUSY,
    });
  }

  /**
   * This store's turn to write (resolves with the function that ends it), or the busy
   * error once `busyTimeoutMs` from `started` has passed (the turn then ends as it comes).
   */
  private turn(started: number): Promise<() => void> {
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    const before = this.tail;
    this.tail = before.then(() => done);
    const mine = before.then(() => release);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(this.busy()), Math.max(0, this.busyMs - (Date.now() - started)));
    });
    return Promise.race([mine, deadline]).then(
      (r) => {
        clearTimeout(timer);
        return r;
      },
      (err: unknown) => {
        void mine.then((r) => r());
        throw err;
      },
    );
  }

  /** `fn` inside the write transaction: committed (on disk) when it returns, rolled back when it throws. */
  private committed<T>(c: SqliteConnection, fn: (c: SqliteConnection) => T): T {
    let result: T;
    try {
      result = fn(c);
      c.exec('COMMIT');
    } catch (err) {
      try {
        c.exec('ROLLBACK');
      } catch {
        // Already rolled back by SQLite (an I/O error, a full disk).
      }
      // A BUSY inside the transaction is not the lock's wait: told as it is.
      throw typeof err === 'object' && err !== null ? Object.assign(err, { inside: true }) : err;
    }
    return result;
  }

  /** Tells a failure: not migrated, a mistake of the caller, or the file's problem with its fix. */
  private failure(operation: string, err: unknown): Error {
    if (
      err instanceof StoreUnavailableError ||
      err instanceof StoreNotMigratedError ||
      err instanceof TypeError
    )
      return err;
    return sqliteNotMigrated(err, this.backend, this.names) ?? sqliteFailure(this.backend, operation, err);
  }

  /**
   * Runs `fn` in a write transaction of the store's connection, committed (and on disk)
   * before it resolves. The operations that arrive while the store waits for its turn (or
   * in the same turn of the event loop) share one transaction, and so one fsync: each in a
   * SAVEPOINT of its own (one that throws is rolled back alone), in the order they came;
   * none resolves before the COMMIT.
   */
  private async write<T>(operation: string, fn: (c: SqliteConnection) => T): Promise<T> {
    const migrating = operation === 'migrate' ? undefined : this.autoMigrate?.();
    if (migrating !== undefined) await migrating;
    return new Promise<T>((resolve, reject) => {
      const op = { operation, fn, resolve, reject } as PendingWrite;
      if (this.pendingWrites !== undefined) {
        this.pendingWrites.push(op);
        return;
      }
      this.pendingWrites = [op];
      nextTurn(() => void this.flush());
    });
  }

  /** Writes the operations gathered by `write` in one transaction (see there). */
  private async flush(): Promise<void> {
    const ops = this.pendingWrites!;
    let results: Array<{ ok: boolean; value: unknown }>;
    try {
      const c = this.connection(ops[0]!.operation);
      results = await this.locked(c, () => {
        // Gathering ends as the lock is had: later operations go to the next transaction.
        if (this.pendingWrites === ops) this.pendingWrites = undefined;
        return this.committed(c, () => ops.map((op) => savepoint(c, op.fn)));
      });
    } catch (err) {
      if (this.pendingWrites === ops) this.pendingWrites = undefined;
      for (const op of ops) op.reject(this.failure(op.operation, err));
      return;
    }
    ops.forEach((op, i) => {
      const r = results[i]!;
      if (r.ok) op.resolve(r.value);
      else op.reject(this.failure(op.operation, r.value));
    });
  }

  /** Runs a read on the store's connection (no lock: WAL readers never wait). */
  private async read<T>(operation: string, fn: (c: SqliteConnection) => T): Promise<T> {
    const migrating = this.autoMigrate?.();
    if (migrating !== undefined) await migrating;
    try {
      return fn(this.connection(operation));
    } catch (err) {
      throw this.failure(operation, err);
    }
  }

  /** Creates the tables and indexes when missing; safe to run again and from several processes at once. */
  async migrate(): Promise<void> {
    this.migrateCalls++;
    await this.write('migrate', (c) => c.exec(schema(this.names)));
  }

  /**
   * Resolves when the file opens, may be written, and holds the store's tables; rejects
   * with STORE_NOT_MIGRATED naming what is missing, or STORE_UNAVAILABLE naming the file
   * and the fix. The store starts it at construction and logs a failure.
   */
  async ready(): Promise<void> {
    await this.write('ping', (c) => {
      const missing = checkSqliteSchema(c, this.backend, this.names);
      if (missing !== undefined) throw missing;
      // A write that changes nothing: a file this process may only read fails here (SQLITE_READONLY), not at the first delivery.
      c.prepare(`UPDATE ${this.names.meta} SET value = value WHERE name = 'fence'`).run();
    });
  }

  /** The same check as `ready()`, for readiness probes (`receiver.health()`). */
  async ping(): Promise<void> {
    await this.ready();
  }

  /** Applies `request` to the job's row on `c` (inside its write transaction) and gives the model's reply. */
  private apply<R extends JobRequest>(c: SqliteConnection, jobId: string, request: R): JobReply<R> {
    const before = recordOf(
      c
        .prepare(
          `SELECT state, token, fence, until_ms, stale_at, flag FROM ${this.names.jobs} WHERE job_id = ?`,
        )
        .get(jobId) as JobRow | undefined,
    );
    const fences = () =>
      Number(
        c
          .prepare(`UPDATE ${this.names.meta} SET value = value + 1 WHERE name = 'fence' RETURNING value`)
          .get()?.value,
      );
    const { record, reply } = transition(before, request, this.now(), fences);
    if (record === before) return reply;
    if (record === undefined) {
      c.prepare(`DELETE FROM ${this.names.jobs} WHERE job_id = ?`).run(jobId);
      return reply;
    }
    c.prepare(
      `INSERT OR REPLACE INTO ${this.names.jobs} (job_id, state, token, fence, until_ms, stale_at, flag) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(jobId, ...rowOf(record));
    if (record.state === 'completed')
      c.prepare(`DELETE FROM ${this.names.pending} WHERE job_id = ?`).run(jobId);
    return reply;
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const { leaseMs, token, graceMs } = claimArgs(jobId, options);
    const reply = await this.write('claim', (c) =>
      this.apply(c, jobId, { op: 'claim', token, leaseMs, graceMs }),
    );
    if (reply.status === 'acquired')
      return { status: 'acquired', token, fence: reply.fence, ...(reply.tookOver ? { tookOver: true } : {}) };
    if (reply.status === 'completed') return { status: 'completed' };
    return {
      status: 'in_progress',
      retryAfterMs: reply.retryAfterMs,
      ...(reply.stale ? { stale: true } : {}),
    };
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<RenewReply> {
    const { leaseMs, fence } = renewArgs(jobId, token, options);
    const request = { op: 'renew', token, leaseMs, ...(fence === undefined ? {} : { fence }) } as const;
    // The claim's own transaction holds the write lock: the renewal goes inside it (no
    // one else can write meanwhile; rolled back, the claim is released after).
    const open = this.transactions.get(`${token}\u0000${jobId}`);
    if (open !== undefined) {
      try {
        return this.apply(open.connection, jobId, request);
      } catch (err) {
        throw this.failure('renew', err);
      }
    }
    return this.write('renew', (c) => this.apply(c, jobId, request));
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<CompleteReply> {
    const { retainMs, fence } = completeArgs(jobId, token, options);
    return this.write('complete', (c) =>
      this.apply(c, jobId, { op: 'complete', token, retainMs, ...(fence === undefined ? {} : { fence }) }),
    );
  }

  async release(jobId: string, token: string, options?: ReleaseOptions): Promise<boolean> {
    const { tainted } = releaseArgs(jobId, token, options);
    const reply = await this.write('release', (c) =>
      this.apply(c, jobId, { op: 'release', token, keepMs: LAPSED_CLAIM_KEEP_MS, tainted }),
    );
    return reply === 'released';
  }

  /**
   * With `transactional: true`: a write transaction on a connection of its own for the
   * holder of `jobId`'s claim (the receivers call it; your handler gets `client`). It
   * holds the file's write lock until `commit` or `rollback`. Its `complete` writes the
   * completion inside it, only while `token` still holds the claim with `fence`.
   */
  async begin(
    jobId: string,
    token: string,
    options: { fence: number; leaseMs?: number },
  ): Promise<StoreTransaction<SqliteTransactionClient>> {
    checkJobId(jobId);
    checkToken(token);
    if (!this.transactional) throw new TypeError('begin() needs a store made with transactional: true');
    const migrating = this.autoMigrate?.();
    if (migrating !== undefined) await migrating;
    let connection: SqliteConnection | undefined;
    let release: (() => void) | undefined;
    try {
      this.connection('begin');
      const c = (connection = this.idle.pop() ?? this.connect('begin', false));
      const started = Date.now();
      // The turn is held until the transaction ends.
      release = await this.turn(started);
      await this.poll(c, () => undefined, started);
    } catch (err) {
      release?.();
      if (connection !== undefined) this.idle.push(connection);
      throw this.failure('begin', err);
    }
    const open: OpenTransaction = { connection, jobId, token, fence: options.fence, release };
    this.transactions.set(`${token}\u0000${jobId}`, open);
    return this.transactionOn(open);
  }

  /** The transaction `begin` gives: the completion written inside it, then one COMMIT or ROLLBACK. */
  private transactionOn(open: OpenTransaction): StoreTransaction<SqliteTransactionClient> {
    let ended = false;
    const c = open.connection;
    const end = async (sql: 'COMMIT' | 'ROLLBACK'): Promise<void> => {
      if (ended) return;
      ended = true;
      this.transactions.delete(`${open.token}\u0000${open.jobId}`);
      try {
        c.exec(sql);
      } catch (err) {
        // Ended in doubt: the connection is closed (SQLite rolls back what it did not commit).
        c.close();
        throw this.failure(sql === 'COMMIT' ? 'commit' : 'rollback', err);
      } finally {
        open.release();
      }
      if (this.closed) c.close();
      else this.idle.push(c);
    };
    return {
      client: transactionClient(c, () => ended),
      complete: async ({ retainMs }) => {
        if (ended) throw new StoreUnavailableError(`${this.backend}: the transaction has ended`);
        try {
          return this.completeIn(c, open, retainMs);
        } catch (err) {
          throw this.failure('complete', err);
        }
      },
      commit: () => end('COMMIT'),
      rollback: () => end('ROLLBACK'),
    };
  }

  /** The completion inside the handler's transaction: written only while the claim (token and fence) still holds. */
  private completeIn(c: SqliteConnection, open: OpenTransaction, retainMs: number): CompleteReply {
    const row = c
      .prepare(`SELECT state, token, fence FROM ${this.names.jobs} WHERE job_id = ?`)
      .get(open.jobId);
    if (row?.state !== 'held' || row.token !== open.token || Number(row.fence) !== open.fence)
      return 'superseded';
    return this.apply(c, open.jobId, {
      op: 'complete',
      token: open.token,
      retainMs,
      fence: open.fence,
    });
  }

  async trackPending(jobId: string, options: TrackPendingOptions = {}): Promise<void> {
    const { since, userParameters: params } = trackArgs(jobId, options);
    await this.write('trackPending', (c) =>
      c
        .prepare(
          `INSERT INTO ${this.names.pending} (job_id, since_ms, user_parameters) VALUES (?, ?, ?)
           ON CONFLICT (job_id) DO UPDATE SET since_ms = excluded.since_ms, user_parameters = excluded.user_parameters`,
        )
        .run(jobId, since, params === undefined ? null : JSON.stringify(params)),
    );
  }

  async listPending(options: ListPendingOptions): Promise<PendingJob[]> {
    const { before, limit } = listArgs(options);
    const rows = await this.read('listPending', (c) =>
      c
        .prepare(
          `SELECT job_id, since_ms, user_parameters FROM ${this.names.pending} WHERE since_ms <= ? ORDER BY since_ms, job_id LIMIT ?`,
        )
        .all(before, limit),
    );
    return rows.map((row) => ({
      jobId: String(row.job_id),
      since: Number(row.since_ms),
      ...(row.user_parameters === null
        ? {}
        : { userParameters: JSON.parse(String(row.user_parameters)) as JsonObjectValue }),
    }));
  }

  async forgetPending(jobId: string): Promise<void> {
    checkJobId(jobId);
    await this.write('forgetPending', (c) =>
      c.prepare(`DELETE FROM ${this.names.pending} WHERE job_id = ?`).run(jobId),
    );
  }

  async deferPending(jobId: string, options: DeferPendingOptions): Promise<void> {
    const { since } = deferArgs(jobId, options);
    await this.write('deferPending', (c) =>
      c.prepare(`UPDATE ${this.names.pending} SET since_ms = ? WHERE job_id = ?`).run(since, jobId),
    );
  }

  /**
   * Deletes completed marks past their retention, releases past their keep, and claims
   * LAPSED_CLAIM_KEEP_MS (24 h) past their lease (or past the takeover grace's mark), so a
   * delivery coming later still finds a lapsed claim and reports its takeover; returns how
   * many rows went. In batches of `batchSize` rows, one write transaction each, oldest first.
   *
   * @example
   * ```ts
   * setInterval(() => store.purgeExpired().catch(console.error), 3_600_000).unref();
   * ```
   */
  async purgeExpired(options: SqlitePurgeOptions = {}): Promise<number> {
    checkOptionNames(options, SQLITE_PURGE_OPTIONS);
    const batchSize = optionalNumber(options?.batchSize, 'batchSize', 1000, { integer: true, max: 100_000 });
    const now = this.now();
    const t = this.names.jobs;
    let total = 0;
    for (;;) {
      const n = await this.write('purgeExpired', (c) =>
        c
          .prepare(
            `DELETE FROM ${t} WHERE job_id IN (
               SELECT job_id FROM ${t} WHERE until_ms <= ?1
                  AND (state <> 'held' OR max(until_ms, coalesce(stale_at, 0)) <= ?1 - ?2)
                ORDER BY until_ms LIMIT ?3)`,
          )
          .run(now, LAPSED_CLAIM_KEEP_MS, batchSize),
      );
      total += n.changes;
      if (n.changes < batchSize) return total;
    }
  }

  /** Closes the file's connections (an open transaction's when it ends). */
  async close(): Promise<void> {
    this.closed = true;
    this.probe.close();
    for (const c of this.idle.splice(0)) c.close();
    this.main?.close();
    this.main = undefined;
  }
}

/** The client a handler writes through: statements on the transaction's connection, never one that ends it. */
function transactionClient(c: SqliteConnection, ended: () => boolean): SqliteTransactionClient {
  const statement = (sql: string) => {
    if (typeof sql !== 'string') throw new TypeError('sql must be a string');
    if (ended()) throw new StoreUnavailableError("jobhook's transaction for this job has ended");
    if (ENDS_TRANSACTION.test(sql))
      throw new TypeError(
        `context.transaction may not end or begin a transaction (${sql.trim().slice(0, 20)}): jobhook commits it with the job's completion; throw to roll it back, or use SAVEPOINT … / ROLLBACK TO … inside it`,
      );
    return c.prepare(sql);
  };
  return {
    run: (sql, ...params) => statement(sql).run(...params),
    get: (sql, ...params) => statement(sql).get(...params),
    all: (sql, ...params) => statement(sql).all(...params),
  };
}

/** The names of {@link SqliteStoreOptions}. */
export const SQLITE_STORE_OPTIONS = {
  path: true,
  table: true,
  busyTimeoutMs: true,
  transactional: true,
  migrate: true,
  log: true,
  now: true,
} as const satisfies OptionNamesOf<SqliteStoreOptions>;
/** `purgeExpired()` of the SQLite store. */
export const SQLITE_PURGE_OPTIONS = { batchSize: true } as const satisfies OptionNamesOf<SqlitePurgeOptions>;
