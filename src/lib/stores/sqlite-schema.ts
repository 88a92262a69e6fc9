/**
 * The SQLite store's tables, its connection settings, and what it tells when the file
 * cannot be used: a failure of the driver becomes a StoreUnavailableError naming the file,
 * what SQLite said and what to do (stores/diagnose.ts), a missing table a
 * StoreNotMigratedError with the fix.
 */
import { StoreNotMigratedError, StoreUnavailableError } from '../base/errors.js';
import type { CompletedRecord, HeldRecord, JobRecord, ReleasedRecord } from '../jobs/model.js';
import { MIGRATE_FIX, storeFailure } from './diagnose.js';
import { SQLITE, sqliteCode, type SqliteConnection, type SqliteValue } from './sqlite-driver.js';

/** The names of the store's tables and index, from its `table` option. */
export interface SqliteNames {
  jobs: string;
  pending: string;
  meta: string;
  jobsIndex: string;
  pendingIndex: string;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,50}$/;

export function sqliteNames(table: unknown): SqliteNames {
  if (typeof table !== 'string' || !IDENTIFIER.test(table))
    throw new TypeError(
      `table must be a plain SQL identifier (letters, digits, _; at most 51); got ${JSON.stringify(table)}`,
    );
  return {
    jobs: `"${table}"`,
    pending: `"${table}_pending"`,
    meta: `"${table}_meta"`,
    jobsIndex: `"${table}_until"`,
    pendingIndex: `"${table}_pending_since"`,
  };
}

/** The jobs table's columns, as this version writes them. */
const JOB_COLUMNS = ['job_id', 'state', 'token', 'fence', 'until_ms', 'stale_at', 'flag'];

/**
 * The schema, each statement safe to run again. A job's record is one row: `state` held,
 * released or completed; `until_ms` the lease end (held) or the time the mark is kept
 * until; `flag` the record's one boolean (held: took over; released: tainted; completed:
 * superseded). The meta table holds the fencing counter, shared by every connection.
 */
export function schema(n: SqliteNames): string {
  return `
    CREATE TABLE IF NOT EXISTS ${n.jobs} (
      job_id TEXT PRIMARY KEY NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('held', 'released', 'completed')),
      token TEXT,
      fence INTEGER,
      until_ms INTEGER NOT NULL,
      stale_at INTEGER,
      flag INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS ${n.jobsIndex} ON ${n.jobs} (until_ms);
    CREATE TABLE IF NOT EXISTS ${n.pending} (
      job_id TEXT PRIMARY KEY NOT NULL,
      since_ms INTEGER NOT NULL,
      user_parameters TEXT
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS ${n.pendingIndex} ON ${n.pending} (since_ms, job_id);
    CREATE TABLE IF NOT EXISTS ${n.meta} (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
    INSERT OR IGNORE INTO ${n.meta} (name, value) VALUES ('fence', 0);`;
}

/**
 * A connection's settings: WAL (readers never wait for the writer, and several processes
 * share the file), `synchronous = FULL` (in WAL mode, every COMMIT waits for the WAL's
 * fsync: a completion acknowledged is on disk, also through a power loss), and no busy
 * handler of SQLite's: the store waits for the write lock itself, without blocking the
 * event loop (see `SqliteIdempotencyStore`'s `busyTimeoutMs`).
 */
export function configure(c: SqliteConnection, first: boolean): void {
  // Switching to WAL needs the lock briefly when the file is new: SQLite's own wait, once per connection.
  c.exec('PRAGMA busy_timeout = 2000');
  if (first) {
    const mode = c.prepare('PRAGMA journal_mode = WAL').get()?.journal_mode;
    if (mode !== 'wal')
      throw new TypeError(
        `SQLite kept the journal mode ${String(mode)} instead of WAL: the store needs a file on a local disk (WAL does not work on network file systems)`,
      );
  }
  c.exec('PRAGMA synchronous = FULL; PRAGMA busy_timeout = 0');
}

/** SQLite's primary code as a name, for diagnose.ts's hints. */
const NAMES = new Map<number, string>(Object.entries(SQLITE).map(([k, v]) => [v, `SQLITE_${k}`]));

/**
 * A driver's error told as a store failure: `SQLite at <file> failed on <operation>:`
 * what the code means and what to do (diagnose.ts's hints), then what SQLite said.
 */
export function sqliteFailure(backend: string, operation: string, err: unknown): StoreUnavailableError {
  const code = sqliteCode(err);
  const name = code === undefined ? undefined : NAMES.get(code);
  const cause =
    name === undefined
      ? err
      : Object.assign(new Error((err as Error).message, { cause: err }), { code: name });
  return storeFailure(backend, operation, cause);
}

/** A statement that failed on a missing table or column: the schema was not migrated (by this version). */
export function sqliteNotMigrated(
  err: unknown,
  backend: string,
  n: SqliteNames,
): StoreNotMigratedError | undefined {
  const message = String((err as Error)?.message ?? '');
  if (sqliteCode(err) !== SQLITE.ERROR || !/no such (table|column)|has no column/.test(message))
    return undefined;
  return new StoreNotMigratedError(
    `${backend}: ${message}: the store's tables (${n.jobs}, ${n.pending}, ${n.meta}) are not there, or were made by another version. ${MIGRATE_FIX}`,
    { cause: err },
  );
}

/** Undefined when the tables and columns are there; else the StoreNotMigratedError naming what is missing. */
export function checkSqliteSchema(
  c: SqliteConnection,
  backend: string,
  n: SqliteNames,
): StoreNotMigratedError | undefined {
  const unquote = (s: string) => s.slice(1, -1);
  const tables = new Set(
    c
      .prepare(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name IN (?, ?, ?)`)
      .all(unquote(n.jobs), unquote(n.pending), unquote(n.meta))
      .map((r) => String(r.name)),
  );
  const missing = [n.jobs, n.pending, n.meta].filter((t) => !tables.has(unquote(t)));
  if (missing.length === 0) {
    const columns = new Set(
      c
        .prepare(`SELECT name FROM pragma_table_info(?)`)
        .all(unquote(n.jobs))
        .map((r) => String(r.name)),
    );
    const lacking = JOB_COLUMNS.filter((col) => !columns.has(col));
    if (lacking.length === 0) return undefined;
    missing.push(`the column${lacking.length === 1 ? '' : 's'} ${lacking.join(', ')} of ${n.jobs}`);
  }
  return new StoreNotMigratedError(
    `${backend}: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not there (migrate() was not run on this file). ${MIGRATE_FIX}`,
  );
}

/** A row of the jobs table. */
export interface JobRow {
  state: SqliteValue;
  token: SqliteValue;
  fence: SqliteValue;
  until_ms: SqliteValue;
  stale_at: SqliteValue;
  flag: SqliteValue;
}

/** The model's record of a row. */
export function recordOf(row: JobRow | undefined): JobRecord | undefined {
  if (row === undefined) return undefined;
  const until = Number(row.until_ms);
  const flag = Number(row.flag) === 1;
  if (row.state === 'held') {
    const held: HeldRecord = {
      state: 'held',
      token: String(row.token),
      fence: Number(row.fence),
      leaseEnd: until,
      tookOver: flag,
    };
    return row.stale_at === null ? held : { ...held, staleAt: Number(row.stale_at) };
  }
  if (row.state === 'released') {
    const released: ReleasedRecord = {
      state: 'released',
      token: String(row.token),
      fence: Number(row.fence),
      until,
      tainted: flag,
    };
    return released;
  }
  const completed: CompletedRecord = {
    state: 'completed',
    until,
    ...(row.token === null ? {} : { token: String(row.token) }),
    ...(row.fence === null ? {} : { fence: Number(row.fence) }),
    ...(flag ? { superseded: true } : {}),
  };
  return completed;
}

/** A record's row values: state, token, fence, until_ms, stale_at, flag. */
export function rowOf(r: JobRecord): [string, string | null, number | null, number, number | null, number] {
  if (r.state === 'held')
    return ['held', r.token, r.fence, r.leaseEnd, r.staleAt ?? null, r.tookOver ? 1 : 0];
  if (r.state === 'released') return ['released', r.token, r.fence, r.until, null, r.tainted ? 1 : 0];
  return ['completed', r.token ?? null, r.fence ?? null, r.until, null, r.superseded === true ? 1 : 0];
}
