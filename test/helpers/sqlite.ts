/**
 * Whether this runtime has the SQLite the SQLite store runs on (node:sqlite from Node 22.13,
 * bun:sqlite), and temporary directories for its files. On Node 20 (the CI machine's) the
 * SQLite suites are skipped with the reason; scripts/test-node-majors.sh runs them on Node
 * 22, 24 and 26.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runtimeName } from '../../src/lib/stores/sqlite-driver.js';

/** The runtime the tests run on (Node, Bun, Deno), named in the SQLite suites' titles. */
export const runtime = runtimeName();

function probe(): string | undefined {
  try {
    createRequire(import.meta.url)('node:sqlite');
    return undefined;
  } catch {
    return `Node ${process.version} has no node:sqlite (Node 22.13 and later have it): scripts/test-node-majors.sh runs the SQLite suites on Node 22, 24 and 26`;
  }
}

/** Why the SQLite suites cannot run here, or undefined when they can. */
export const sqliteMissing = probe();

if (sqliteMissing !== undefined && process.env.JOBHOOK_REQUIRE_SQLITE === '1')
  throw new Error(`JOBHOOK_REQUIRE_SQLITE=1, but ${sqliteMissing}`);

const dirs: string[] = [];

/** A fresh directory for database files (removed by `removeSqliteDirs`). */
export function sqliteDir(label = 'sqlite'): string {
  const dir = mkdtempSync(join(tmpdir(), `jobhook-${label}-`));
  dirs.push(dir);
  return dir;
}

export function removeSqliteDirs(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}
