/**
 * What a store tells when it cannot work: which server (host and port, never a user or
 * password), what went wrong (connection refused, authentication, a timeout, tables
 * never created) and what to do about it. Failed operations become
 * `StoreUnavailableError`s (or `StoreNotMigratedError`s) that say so; a probe started at
 * construction logs the problem before the first delivery, loud but never a flood
 * (base/alerts.ts).
 */
import { Alerts } from '../base/alerts.js';
import { isWebhookError, StoreNotMigratedError, StoreUnavailableError } from '../base/errors.js';
import { errorDetails, type Logger } from '../base/log.js';

/**
 * `host:port[/database]` of a connection URL or of a client's options: what an operator
 * needs to find the server, and nothing of its credentials.
 */
export function addressOf(o: {
  url?: string;
  host?: string;
  port?: number | string;
  path?: string;
  database?: string;
  defaultPort: number;
}): string {
  let host = o.host;
  let port = o.port;
  let database = o.database;
  if (o.url !== undefined) {
    try {
      const u = new URL(o.url);
      host = u.hostname || u.searchParams.get('host') || undefined;
      port = u.port || undefined;
      database = decodeURIComponent(u.pathname.replace(/^\//, '')) || undefined;
    } catch {
      return 'the configured server';
    }
  }
  if (o.path !== undefined) return o.path;
  const at =
    host === undefined || host === ''
      ? 'localhost'
      : host.startsWith('/')
        ? host
        : host.includes(':')
          ? `[${host}]`
          : host;
  return `${at}${at.startsWith('/') ? '' : `:${port ?? o.defaultPort}`}${database === undefined ? '' : `/${database}`}`;
}

/** What a cause means and what to do, by its code (Node's, PostgreSQL's SQLSTATE, Redis's reply prefix). */
const HINTS: Readonly<Record<string, string>> = {
  ECONNREFUSED:
    'connection refused: nothing listens at that address (is the server running? are the host and port right?)',
  ENOTFOUND: 'the host name does not resolve (check the host in the URL)',
  EAI_AGAIN: 'the host name could not be resolved now (DNS)',
  ETIMEDOUT: 'the connection timed out (a firewall, a wrong address, or the server is overloaded)',
  EHOSTUNREACH: 'no route to the host (network or firewall)',
  ECONNRESET: 'the server closed the connection',
  EPIPE: 'the server closed the connection',
  WRONGPASS:
    "Redis refused the password (check the password in the URL, or the client's username and password)",
  NOAUTH:
    "Redis requires a password and none was given (redis://:password@host:port, or the client's password option)",
  NOPERM: 'the Redis user lacks a permission the store needs (EVALSHA, GET, SET, ZADD, TIME…)',
  LOADING: 'Redis is loading its data set after a restart',
  '28P01': 'authentication failed (check the user and password in the connection string)',
  '28000': 'the server refused this user (the role does not exist, or pg_hba.conf has no entry for it)',
  '3D000': 'the database does not exist (check its name in the connection string)',
  '3F000': 'the schema does not exist (CREATE SCHEMA it, or give the store an existing schema)',
  '42501': "the user lacks a privilege on the store's tables (run migrate() as their owner, or GRANT it)",
  '53300': 'the server has no connection slot left (max_connections)',
  '57P01': 'the server is shutting down',
  '57P03': 'the server is starting up or shutting down',
  SQLITE_BUSY:
    'the database file is locked: another connection held its write lock past busyTimeoutMs (a transactional handler or a long transaction of another process, a process paused mid-write); find it, or raise busyTimeoutMs',
  SQLITE_LOCKED: 'a table is locked by another statement of this connection (a query still being read)',
  SQLITE_CANTOPEN:
    'the file cannot be opened (does its directory exist? may this process create and write files there, the -wal and -shm files beside it too?)',
  SQLITE_READONLY:
    'the file is read-only for this process (give it write permission on the file and its directory, where SQLite keeps the -wal and -shm files)',
  SQLITE_PERM: 'the file may not be written (its permissions, or a read-only mount)',
  SQLITE_FULL: 'the disk is full (free space where the file is)',
  SQLITE_IOERR: 'the disk failed a read or write (check the file system and its free space)',
  SQLITE_NOTADB: 'the file is not an SQLite database (the path names another file)',
  SQLITE_CORRUPT:
    'the database file is damaged (restore it from a copy, or remove it: jobs in progress are then processed again)',
};

/** The code of an error or of its causes: `code` (Node, PostgreSQL), else a Redis reply's prefix (WRONGPASS, NOAUTH…). */
export function causeCode(err: unknown): string | undefined {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '' && !isWebhookError(e)) return code;
    const inner = (e as { errors?: unknown }).errors;
    if (Array.isArray(inner) && inner.length > 0) {
      const first = causeCode(inner[0]);
      if (first !== undefined) return first;
    }
    const reply = /^([A-Z]{4,12}) /.exec(e.message)?.[1];
    if (reply !== undefined && HINTS[reply] !== undefined) return reply;
  }
  return undefined;
}

/** The message of an error, with its inner errors' when it has none of its own (Node's AggregateError). */
function messageOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const inner = (err as { errors?: unknown }).errors;
  if (err.message === '' && Array.isArray(inner)) return inner.map(messageOf).join('; ');
  return err.message;
}

/** The cause told: its meaning and code when known, then what the driver said. */
export function causeText(err: unknown): string {
  const code = causeCode(err);
  const hint = code === undefined ? undefined : HINTS[code];
  return hint === undefined ? messageOf(err) : `${hint} [${code}]: ${messageOf(err)}`;
}

/**
 * A failed operation as a StoreUnavailableError naming the server and the cause. `last`:
 * the client's last connection error, for a failure that does not say it (ioredis's
 * "max retries per request" after its reconnection attempts failed).
 */
export function storeFailure(
  backend: string,
  operation: string,
  err: unknown,
  last?: unknown,
): StoreUnavailableError {
  const cause = causeCode(err) !== undefined || last === undefined ? err : last;
  return new StoreUnavailableError(`${backend} failed on ${operation}: ${causeText(cause)}`, { cause });
}

/** The deadline's failure: the last connection error, when there is one, says why. */
export function storeTimeout(
  backend: string,
  operation: string,
  timeoutMs: number,
  last?: unknown,
): StoreUnavailableError {
  const why = last === undefined ? '' : `; the last connection attempt failed: ${causeText(last)}`;
  return new StoreUnavailableError(
    `${backend} did not answer ${operation} within ${timeoutMs} ms${why}.`,
    last === undefined ? undefined : { cause: last },
  );
}

/** The fix, in every message that says the tables are missing. */
export const MIGRATE_FIX =
  'Run `await store.migrate()` once at start (safe to run concurrently and again), or create the store with `migrate: true`.';

/**
 * PostgreSQL's 42P01 (undefined_table) or 42703 (undefined_column) on one of the
 * store's statements: the tables were never created, or by an earlier version.
 */
export function notMigrated(
  err: unknown,
  backend: string,
  tables: string,
): StoreNotMigratedError | undefined {
  const code = (err as { code?: unknown })?.code;
  if (code !== '42P01' && code !== '42703') return undefined;
  const what = code === '42P01' ? 'undefined_table' : 'undefined_column, a table made by an earlier version';
  return new StoreNotMigratedError(
    `${backend}: ${(err as Error).message} (${code} ${what}): the store's tables (${tables}) are not there. ${MIGRATE_FIX}`,
    { cause: err },
  );
}

/**
 * Runs `task` at the first call, and once: concurrent first calls share it; once it
 * succeeded the call returns undefined (nothing to wait for); a failure lets the next
 * call try again.
 */
export function firstUse(task: () => Promise<void>): () => Promise<void> | undefined {
  let done = false;
  let running: Promise<void> | undefined;
  return () => {
    if (done) return undefined;
    running ??= task().then(
      () => {
        done = true;
      },
      (err: unknown) => {
        running = undefined;
        throw err;
      },
    );
    return running;
  };
}

/**
 * The probe a store starts at construction: `ready()` in the background, its failure
 * logged at error (once per interval and kind) with the server and the cause, so an
 * operator reads it before the first delivery; never a rejection nobody handles.
 */
export class StoreProbe {
  private readonly alerts: Alerts;
  private closed = false;

  constructor(private readonly log: Logger) {
    this.alerts = new Alerts(log);
  }

  /** Starts `probe` on the next turn (after the constructor returned); `quiet(err)`: a failure not to tell (a migrate() under way). */
  start(what: string, probe: () => Promise<void>, quiet: (err: unknown) => boolean = () => false): void {
    const timer = setTimeout(() => {
      probe().then(
        () => this.log.debug(`jobhook: ${what} is ready`),
        (err: unknown) => {
          if (!this.closed && !quiet(err)) this.tell(what, err);
        },
      );
    }, 0);
    (timer as { unref?: () => void }).unref?.();
  }

  /** Logs that the store is not ready, rate-limited by the error's code and cause. */
  tell(what: string, err: unknown): void {
    const code = isWebhookError(err) ? err.code : 'ERROR';
    this.alerts.raise(
      `${code}:${causeCode(err) ?? ''}`,
      'error',
      `${what} not ready (${code})`,
      () => `jobhook: ${what} is not ready: ${messageOf(err)}`,
      () => errorDetails(err),
    );
  }

  /** The store was closed: a probe still under way tells nothing. */
  close(): void {
    this.closed = true;
    this.alerts.close();
  }
}
