/**
 * The SQLite store on the runtime's own SQLite (a file in a temporary directory): the
 * contract and the receivers over it (serverStoreSuite, two stores on one file standing
 * for two processes), and what is particular to it: durable across a reopen, migrate(),
 * its diagnostics (a file it cannot open, a file that is no database, tables not
 * migrated, the write lock held past busyTimeoutMs) and the transactional mode.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteIdempotencyStore, type SqliteTransactionClient } from '../../src/sqlite.js';
import { createJobRunner, type ClaimContext } from '../../src/lib/jobs/runner.js';
import { LAPSED_CLAIM_KEEP_MS } from '../../src/lib/jobs/store.js';
import { jobId } from '../helpers/deliveries.js';
import { removeSqliteDirs, runtime, sqliteDir, sqliteMissing } from '../helpers/sqlite.js';
import { serverStoreSuite } from './server-store-suite.js';

const skip = sqliteMissing !== undefined;
afterAll(removeSqliteDirs);

const dir = skip ? '' : sqliteDir();
serverStoreSuite({
  name: skip ? `SQLite (skipped: ${sqliteMissing})` : `SQLite on ${runtime}`,
  url: skip ? '' : join(dir, 'contract.db'),
  // No server to stop: a process killed mid-write is the fault suite's (test/faults).
  skipReason: 'a file, no server to stop (processes killed on one file: test/faults/sqlite.faults.ts)',
  make: async (path) => {
    const store = new SqliteIdempotencyStore({ path, log: false });
    await store.migrate();
    return store;
  },
  throwaway: () => Promise.reject(new Error('no server')),
});

/** A raw connection of the test's own, on the runtime's SQLite. */
function raw(path: string): {
  exec(sql: string): void;
  prepare(sql: string): { all(...p: unknown[]): unknown[] };
  close(): void;
} {
  const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite') as {
    DatabaseSync: new (p: string) => ReturnType<typeof raw>;
  };
  return new DatabaseSync(path);
}

describe.skipIf(skip)('SqliteIdempotencyStore specifics', () => {
  const stores: SqliteIdempotencyStore[] = [];
  const make = (o: ConstructorParameters<typeof SqliteIdempotencyStore>[0]) => {
    const s = new SqliteIdempotencyStore({ log: false, ...o });
    stores.push(s);
    return s;
  };
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
  });

  it('a completion survives the store closed and opened again (another process, a restart); claims in progress keep their lease and fencing number', async () => {
    const path = join(sqliteDir(), 'durable.db');
    const first = make({ path, migrate: true });
    const done = await first.claim('durable-done', { leaseMs: 60_000 });
    const held = await first.claim('durable-held', { leaseMs: 60_000 });
    if (done.status !== 'acquired' || held.status !== 'acquired') throw new Error('claims');
    expect(await first.complete('durable-done', done.token, { retainMs: 60_000 })).toBe('completed');
    await first.close();
    const again = make({ path });
    expect(await again.claim('durable-done', { leaseMs: 1000 })).toEqual({ status: 'completed' });
    expect(await again.claim('durable-held', { leaseMs: 1000 })).toMatchObject({ status: 'in_progress' });
    const next = await again.claim('durable-new', { leaseMs: 1000 });
    expect(next).toMatchObject({ status: 'acquired' });
    if (next.status === 'acquired') expect(next.fence).toBeGreaterThan(held.fence);
    // In WAL mode with synchronous = FULL (a COMMIT waits for the fsync of the WAL).
    const c = raw(path);
    expect(c.prepare('PRAGMA journal_mode').all()).toEqual([{ journal_mode: 'wal' }]);
    c.close();
  });

  it('migrate() is safe to run concurrently from several stores and again; migrate: true creates the tables at first use', async () => {
    const path = join(sqliteDir(), 'migrate.db');
    const many = Array.from({ length: 5 }, () => make({ path }));
    await Promise.all(many.map((s) => s.migrate()));
    await many[0]!.migrate();
    await many[1]!.ready();
    const auto = make({ path: join(sqliteDir(), 'auto.db'), migrate: true });
    expect((await auto.claim('auto', { leaseMs: 1000 })).status).toBe('acquired');
    await auto.ready();
  });

  it('tables not migrated: STORE_NOT_MIGRATED naming the tables and the fix, from ready() and from a claim', async () => {
    const store = make({ path: join(sqliteDir(), 'bare.db') });
    await expect(store.ready()).rejects.toMatchObject({
      code: 'STORE_NOT_MIGRATED',
      message: expect.stringMatching(/"jobhook_jobs".*not there.*store\.migrate\(\)/s),
    });
    await expect(store.claim('bare', { leaseMs: 1000 })).rejects.toMatchObject({
      code: 'STORE_NOT_MIGRATED',
      message: expect.stringMatching(/no such table.*migrate: true/s),
    });
  });

  it('a file that cannot be opened (its directory missing) or is no database: STORE_UNAVAILABLE naming the file and the fix', async () => {
    const missing = join(sqliteDir(), 'no', 'such', 'dir', 'jobs.db');
    await expect(make({ path: missing }).claim('x', { leaseMs: 1000 })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining(
        `SQLite at ${missing} failed on claim: the file cannot be opened (does its directory exist?`,
      ),
    });
    const text = join(sqliteDir(), 'text.db');
    writeFileSync(
      text,
      'these are not the pages of a database, just some text long enough to be read\n'.repeat(50),
    );
    await expect(make({ path: text }).ready()).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining(
        'failed on ping: the file is not an SQLite database (the path names another file) [SQLITE_NOTADB]',
      ),
    });
  });

  it('the write lock held by another connection past busyTimeoutMs: STORE_UNAVAILABLE saying so and what to do; free again, the claim goes through', async () => {
    const path = join(sqliteDir(), 'locked.db');
    const store = make({ path, migrate: true, busyTimeoutMs: 200 });
    await store.ready();
    const other = raw(path);
    other.exec('BEGIN IMMEDIATE');
    await expect(store.claim('locked', { leaseMs: 1000 })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringMatching(
        /database file is locked.*raise busyTimeoutMs \[SQLITE_BUSY\].*within 200 ms/s,
      ),
    });
    // A wait shorter than the timeout: the claim waits for the lock without blocking the event loop.
    const waiting = store.claim('locked', { leaseMs: 1000 });
    await new Promise((r) => setTimeout(r, 50));
    other.exec('COMMIT');
    other.close();
    expect((await waiting).status).toBe('acquired');
  });

  it('purgeExpired() removes completed marks past their retention, releases past their keep, claims LAPSED_CLAIM_KEEP_MS past their lease, nothing else', async () => {
    let now = Date.UTC(2030, 0, 1);
    const store = make({ path: join(sqliteDir(), 'purge.db'), migrate: true, now: () => now });
    const done = await store.claim('done', { leaseMs: 1000 });
    const lapsed = await store.claim('lapsed', { leaseMs: 1000 });
    const released = await store.claim('released', { leaseMs: 1000 });
    if (done.status !== 'acquired' || lapsed.status !== 'acquired' || released.status !== 'acquired')
      throw new Error('claims');
    await store.complete('done', done.token, { retainMs: 5000 });
    await store.release('released', released.token);
    now += 10_000;
    await store.claim('live', { leaseMs: 60_000 });
    expect(await store.purgeExpired()).toBe(1); // the completion
    now += LAPSED_CLAIM_KEEP_MS;
    expect(await store.purgeExpired({ batchSize: 1 })).toBe(2); // the lapsed claim and the release, one a batch
    expect((await store.claim('lapsed', { leaseMs: 1000 })) as { tookOver?: boolean }).not.toHaveProperty(
      'tookOver',
    );
  });

  it('refuses an in-memory database and unknown options, naming what to use', () => {
    expect(() => new SqliteIdempotencyStore({ path: ':memory:' })).toThrow(/use MemoryIdempotencyStore/);
    expect(() => new SqliteIdempotencyStore({ path: 'x.db', tabel: 'x' } as never)).toThrow(/tabel/);
    expect(() => new SqliteIdempotencyStore({ path: 'x.db', table: 'a-b' })).toThrow(/plain SQL identifier/);
  });
});

describe.skipIf(skip)('SqliteIdempotencyStore transactional: the handler writes with the completion', () => {
  const path = skip ? '' : join(sqliteDir(), 'tx.db');
  const stores: SqliteIdempotencyStore[] = [];
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
  });
  const store = () => {
    const s = new SqliteIdempotencyStore({ path, migrate: true, transactional: true, log: false });
    stores.push(s);
    return s;
  };
  const count = (id: string) => {
    const c = raw(path);
    const rows = c.prepare('SELECT count(*) AS n FROM effects WHERE job_id = ?').all(id) as Array<{
      n: number;
    }>;
    c.close();
    return rows[0]!.n;
  };
  const effect = (id: string) => async (context: ClaimContext) => {
    const tx = context.transaction as SqliteTransactionClient;
    tx.run('INSERT INTO effects (job_id) VALUES (?)', id);
  };

  it('rows written through context.transaction commit with the completion; a throwing handler leaves none; a retry after a rollback writes once', async () => {
    const s = store();
    await s.migrate();
    const c = raw(path);
    c.exec('CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, job_id TEXT NOT NULL)');
    c.close();
    const runner = createJobRunner({ store: s, log: false });
    const id = jobId('tx-once');
    expect((await runner.run(id, effect(id))).kind).toBe('processed');
    expect((await runner.run(id, effect(id))).kind).toBe('duplicate');
    expect(count(id)).toBe(1);

    const failing = jobId('tx-throws');
    const thrown = await runner.run(failing, async (context) => {
      await effect(failing)(context);
      throw new Error('handler failed after its write');
    });
    expect(thrown.kind).toBe('handler_failed');
    expect(count(failing)).toBe(0);
    expect((await runner.run(failing, effect(failing))).kind).toBe('processed');
    expect(count(failing)).toBe(1);
  });

  it("a handler may not end jobhook's transaction: COMMIT through context.transaction is refused and nothing is written", async () => {
    const s = store();
    const runner = createJobRunner({ store: s, log: false });
    const id = jobId('tx-commit');
    const r = await runner.run(id, async (context) => {
      await effect(id)(context);
      (context.transaction as SqliteTransactionClient).run('COMMIT');
    });
    expect(r.kind).toBe('handler_failed');
    expect(count(id)).toBe(0);
  });

  it('while a handler holds the transaction, other stores on the file wait for the write lock and then see the job completed', async () => {
    const a = store();
    const b = store();
    const id = jobId('tx-wait');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const running = createJobRunner({ store: a, log: false }).run(id, async (context) => {
      await effect(id)(context);
      await gate;
    });
    await new Promise((r) => setTimeout(r, 100));
    const other = b.claim(id, { leaseMs: 5000 });
    setTimeout(release, 100);
    expect((await running).kind).toBe('processed');
    expect(await other).toEqual({ status: 'completed' });
    expect(count(id)).toBe(1);
  });
});

describe.runIf(skip && typeof (globalThis as { Bun?: unknown }).Bun === 'undefined')(
  'SqliteIdempotencyStore on a Node without node:sqlite',
  () => {
    it('fails at construction naming the Node versions that have it and the stores to use instead', () => {
      expect(() => new SqliteIdempotencyStore({ path: 'x.db' })).toThrow(
        new RegExp(
          `which Node ${process.version.replace(/\./g, '\\.')} does not have: run on Node 22\\.13 or later.*memory store`,
        ),
      );
    });
    it('the same in a fresh process (the message a user sees first)', () => {
      const r = spawnSync(
        process.execPath,
        [
          '--import',
          'tsx',
          '-e',
          "import('./src/sqlite.ts').then(m => new m.SqliteIdempotencyStore({ path: 'x.db' }))",
        ],
        { encoding: 'utf8' },
      );
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/needs the runtime's built-in SQLite \(node:sqlite\)/);
    });
  },
);
