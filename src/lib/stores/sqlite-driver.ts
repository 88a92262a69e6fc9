/**
 * The SQLite store's seam to the runtime's own SQLite: `node:sqlite` on Node 22.13 and
 * later (and on Deno), `bun:sqlite` on Bun. Both are synchronous and built in, so the
 * store needs no native add-on and no download; this file gives them one shape (a
 * database that prepares statements, statements that run, get and list) and one reading
 * of their errors (SQLite's primary result code).
 */
import { createRequire } from 'node:module';

/** A value a statement binds or returns. */
export type SqliteValue = string | number | bigint | null | Uint8Array;

/** A prepared statement: positional parameters (`?`). */
export interface SqliteStatement {
  /** Runs it; how many rows it changed. */
  run(...params: SqliteValue[]): { changes: number };
  /** Its first row, or undefined. */
  get(...params: SqliteValue[]): Record<string, SqliteValue> | undefined;
  /** All its rows. */
  all(...params: SqliteValue[]): Array<Record<string, SqliteValue>>;
}

/** One connection to a database file. */
export interface SqliteConnection {
  /** Runs statements without parameters (PRAGMAs, BEGIN, COMMIT, the schema). */
  exec(sql: string): void;
  /** A statement, prepared once and kept by the connection. */
  prepare(sql: string): SqliteStatement;
  close(): void;
}

/** Opens a connection to `path` (creating the file when missing). */
export type SqliteOpener = (path: string) => SqliteConnection;

interface NodeSqlite {
  DatabaseSync: new (
    path: string,
    options?: { open?: boolean },
  ) => {
    exec(sql: string): void;
    prepare(sql: string): {
      run(...p: SqliteValue[]): { changes: number | bigint };
      get(...p: SqliteValue[]): Record<string, SqliteValue> | undefined;
      all(...p: SqliteValue[]): Array<Record<string, SqliteValue>>;
    };
    close(): void;
  };
}

interface BunSqlite {
  Database: new (
    path: string,
    options?: { create?: boolean; strict?: boolean },
  ) => {
    exec(sql: string): void;
    prepare(sql: string): {
      run(...p: SqliteValue[]): { changes: number };
      get(...p: SqliteValue[]): Record<string, SqliteValue> | null;
      all(...p: SqliteValue[]): Array<Record<string, SqliteValue>>;
    };
    close(): void;
  };
}

/** The running runtime's name and version, for messages. */
export function runtimeName(): string {
  const g = globalThis as { Bun?: { version: string }; Deno?: { version: { deno: string } } };
  if (g.Bun !== undefined) return `Bun ${g.Bun.version}`;
  if (g.Deno !== undefined) return `Deno ${g.Deno.version.deno}`;
  return `Node ${typeof process === 'undefined' ? 'unknown' : process.version}`;
}

/** Why the runtime has no SQLite jobhook can use, with what to run instead. */
function unavailable(err: unknown): TypeError {
  return new TypeError(
    `SqliteIdempotencyStore needs the runtime's built-in SQLite (node:sqlite), which ${runtimeName()} does not have: run on Node 22.13 or later (Node 22.5–22.12 with --experimental-sqlite), on Bun, or on Deno 2.2 or later; on Node 20 use the memory store (one process, forgets on restart) or the Redis or PostgreSQL store.`,
    { cause: err },
  );
}

/**
 * The opener of this runtime's SQLite, loaded at once (a missing one fails at the store's
 * construction, with the versions that have it).
 */
export function loadSqlite(): SqliteOpener {
  const require = createRequire(import.meta.url);
  if ((globalThis as { Bun?: unknown }).Bun !== undefined) {
    const { Database } = require('bun:sqlite') as BunSqlite;
    return (path) => bunConnection(new Database(path, { create: true }));
  }
  let mod: NodeSqlite;
  try {
    mod = require('node:sqlite') as NodeSqlite;
  } catch (err) {
    throw unavailable(err);
  }
  return (path) => nodeConnection(new mod.DatabaseSync(path));
}

/** Most statements kept per connection: the store's own, and a handler's first ones. */
const KEPT_STATEMENTS = 200;

/** Statements kept per connection, by their text (the store prepares each once). */
function cached(prepare: (sql: string) => SqliteStatement): (sql: string) => SqliteStatement {
  const statements = new Map<string, SqliteStatement>();
  return (sql) => {
    let s = statements.get(sql);
    if (s !== undefined) return s;
    s = prepare(sql);
    if (statements.size < KEPT_STATEMENTS) statements.set(sql, s);
    return s;
  };
}

function nodeConnection(db: InstanceType<NodeSqlite['DatabaseSync']>): SqliteConnection {
  return {
    exec: (sql) => db.exec(sql),
    prepare: cached((sql) => {
      const s = db.prepare(sql);
      return {
        run: (...p) => ({ changes: Number(s.run(...p).changes) }),
        get: (...p) => s.get(...p),
        all: (...p) => s.all(...p),
      };
    }),
    close: () => db.close(),
  };
}

function bunConnection(db: InstanceType<BunSqlite['Database']>): SqliteConnection {
  return {
    exec: (sql) => db.exec(sql),
    prepare: cached((sql) => {
      const s = db.prepare(sql);
      return {
        run: (...p) => ({ changes: s.run(...p).changes }),
        get: (...p) => s.get(...p) ?? undefined,
        all: (...p) => s.all(...p),
      };
    }),
    close: () => db.close(),
  };
}

/** SQLite's primary result codes the store tells apart. */
export const SQLITE = {
  ERROR: 1,
  PERM: 3,
  BUSY: 5,
  LOCKED: 6,
  READONLY: 8,
  IOERR: 10,
  CORRUPT: 11,
  FULL: 13,
  CANTOPEN: 14,
  NOTADB: 26,
} as const;

/**
 * SQLite's primary result code of a driver's error (node:sqlite: `errcode`; bun:sqlite:
 * `errno`, or its `code` name), or undefined for an error that is not SQLite's.
 */
export function sqliteCode(err: unknown): number | undefined {
  const e = err as { errcode?: unknown; errno?: unknown; code?: unknown } | undefined;
  const n = typeof e?.errcode === 'number' ? e.errcode : typeof e?.errno === 'number' ? e.errno : undefined;
  if (n !== undefined) return n & 0xff;
  if (typeof e?.code === 'string' && e.code.startsWith('SQLITE_')) {
    const name = e.code.slice('SQLITE_'.length).split('_')[0] as keyof typeof SQLITE;
    return SQLITE[name];
  }
  return undefined;
}
