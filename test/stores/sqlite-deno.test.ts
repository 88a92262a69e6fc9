/**
 * The SQLite store on Deno (node:sqlite there), run by the Deno binary of the runtime
 * matrix (test/runtimes/harness.ts) on test/stores/sqlite-deno-check.ts: this runs with
 * npm test on any Node, Node 20 included.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/paths.js';
import { findRuntime } from '../runtimes/harness.js';

const deno = findRuntime('Deno');

describe.skipIf(!deno.ok)(
  `SQLite store on Deno${deno.ok ? ` ${deno.version}` : ` (skipped: ${deno.ok ? '' : deno.reason})`}`,
  () => {
    it('two stores on one file, a restart and the transactional mode answer as on Node', () => {
      const run = spawnSync(
        deno.ok ? deno.bin : 'deno',
        [
          'run',
          '--allow-all',
          '--unstable-sloppy-imports',
          '--quiet',
          join(ROOT, 'test/stores/sqlite-deno-check.ts'),
        ],
        { encoding: 'utf8', timeout: 60_000, env: { ...process.env, NO_COLOR: '1' } },
      );
      expect(run.status, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout.trim().split('\n').at(-1)!)).toEqual({
        claim: 'acquired',
        otherStore: 'in_progress',
        complete: 'completed',
        afterRestart: 'completed',
        txComplete: 'completed',
        txRows: 1,
      });
    });
  },
);
