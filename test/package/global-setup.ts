/**
 * A scratch directory for the whole test run, where the first test that needs the
 * packed package builds it (test/package/tarball.ts). Nothing is built here: a run
 * that needs no tarball pays nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { ROOT } from '../helpers/paths.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where the packed tarball of this run is built, once (test/package/tarball.ts). */
    packDir: string;
  }
}

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'jobhook-pack-'));
  project.provide('packDir', dir);
  return () => {
    rmSync(dir, { recursive: true, force: true });
    // The example apps of this run (test/examples/harness.ts).
    rmSync(join(ROOT, '.tmp', `examples-${basename(dir)}`), { recursive: true, force: true });
  };
}
