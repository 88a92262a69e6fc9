/**
 * The SQLite cases of the receiver-fault suite: the "server" is a database file in the
 * case's directory (nothing to pause or restart: the receivers are what is killed), and
 * the effects table in that file, read with a connection of the suite's own.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { FaultableServer } from '../../helpers/servers.js';
import { EFFECTS_TABLE } from './process-shared.js';

interface Connection {
  exec(sql: string): void;
  prepare(sql: string): { all(): unknown[] };
  close(): void;
}

/** The case's database file, in the shape of a throwaway server (its url: the path). */
export function sqliteFile(dir: string): FaultableServer {
  const none = () => Promise.reject(new Error('a SQLite file has no server to stop'));
  return {
    url: join(dir, 'store.db'),
    dir,
    start: none,
    stop: none,
    pause: none,
    resume: none,
    kill: none,
    destroy: async () => undefined, // the case removes its directory
  };
}

/** The effects table in the store's file (created now), and its rows in the order written. */
export function sqliteEffects(path: string): {
  transactional(flag: boolean): boolean;
  rows(): Array<{ job_id: string; pid: number; fence: string }>;
  close(): void;
} {
  const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite') as {
    DatabaseSync: new (p: string) => Connection;
  };
  const c = new DatabaseSync(path);
  c.exec('PRAGMA busy_timeout = 10000');
  c.exec(
    `CREATE TABLE IF NOT EXISTS ${EFFECTS_TABLE} (id INTEGER PRIMARY KEY, job_id TEXT NOT NULL, pid INTEGER NOT NULL, fence INTEGER NOT NULL)`,
  );
  return {
    transactional: (flag) => flag,
    rows: () =>
      (
        c.prepare(`SELECT job_id, pid, fence FROM ${EFFECTS_TABLE} ORDER BY id`).all() as Array<{
          job_id: string;
          pid: number;
          fence: number;
        }>
      ).map((r) => ({ job_id: r.job_id, pid: r.pid, fence: String(r.fence) })),
    close: () => c.close(),
  };
}
