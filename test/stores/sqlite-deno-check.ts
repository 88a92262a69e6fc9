/**
 * Run by Deno with --unstable-sloppy-imports (the .js imports find the .ts sources; test/stores/sqlite-deno.test.ts): the SQLite store on Deno's node:sqlite.
 * Two stores on one file (two processes would be the same), a restart, the transactional
 * mode; prints one JSON line of what each step answered.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteIdempotencyStore } from '../../src/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'jobhook-deno-sqlite-'));
const path = join(dir, 'store.db');
const a = new SqliteIdempotencyStore({ path, migrate: true, log: false });
const b = new SqliteIdempotencyStore({ path, log: false });
const out: Record<string, unknown> = {};
const first = await a.claim('deno-job', { leaseMs: 10_000 });
if (first.status !== 'acquired') throw new Error(first.status);
out.claim = first.status;
out.otherStore = (await b.claim('deno-job', { leaseMs: 1000 })).status;
out.complete = await a.complete('deno-job', first.token, { retainMs: 60_000 });
await a.close();
await b.close();
const again = new SqliteIdempotencyStore({ path, transactional: true, log: false });
out.afterRestart = (await again.claim('deno-job', { leaseMs: 1000 })).status;
const held = await again.claim('deno-tx', { leaseMs: 10_000 });
if (held.status !== 'acquired') throw new Error(held.status);
const tx = await again.begin('deno-tx', held.token, { fence: held.fence });
tx.client.run('CREATE TABLE IF NOT EXISTS effects (job_id TEXT)');
tx.client.run('INSERT INTO effects (job_id) VALUES (?)', 'deno-tx');
out.txComplete = await tx.complete({ retainMs: 60_000 });
await tx.commit();
out.txRows = await readRows(path);
await again.close();
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(out));

async function readRows(file: string): Promise<number> {
  const reader = new SqliteIdempotencyStore({ path: file, transactional: true, log: false });
  const c = await reader.claim('deno-read', { leaseMs: 1000 });
  if (c.status !== 'acquired') throw new Error(c.status);
  const t = await reader.begin('deno-read', c.token, { fence: c.fence });
  const n = t.client.get('SELECT count(*) AS n FROM effects')?.n;
  await t.rollback();
  await reader.close();
  return Number(n);
}
