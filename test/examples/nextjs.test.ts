/**
 * examples/nextjs against the packed package: `next build` with no key in the
 * environment (the route's key is a function, read at the first delivery), then
 * `next start` with it. The build takes a minute or two on two cores, so it runs when
 * JOBHOOK_TEST_NEXT=1 (.ci/run sets it) and is skipped, with a notice, otherwise.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/paths.js';
import { exampleApp, expectRecipe, start, type Running } from './harness.js';

const enabled = process.env.JOBHOOK_TEST_NEXT === '1';
if (!enabled)
  console.warn(
    '\n[jobhook] examples/nextjs skipped: its next build takes minutes; JOBHOOK_TEST_NEXT=1 runs it (.ci/run does)\n',
  );

const NEXT = join(ROOT, 'node_modules', 'next', 'dist', 'bin', 'next');

describe.skipIf(!enabled)('examples/nextjs (App Router route handler)', () => {
  let dir: string;
  let remove: () => void;
  let server: Running | undefined;
  let buildSeconds = 0;
  beforeAll(async () => {
    ({ dir, remove } = await exampleApp('nextjs'));
  }, 15 * 60_000);
  afterAll(async () => {
    await server?.stop();
    remove?.();
  });

  it(
    'next build succeeds without the key in the environment',
    async () => {
      const env: NodeJS.ProcessEnv = { ...process.env, NEXT_TELEMETRY_DISABLED: '1' };
      delete env.GATEWAY_PUBLIC_KEY;
      const t = performance.now();
      const { stdout } = await promisify(execFile)(process.execPath, [NEXT, 'build'], {
        cwd: dir,
        env,
        maxBuffer: 16 * 1024 * 1024,
      });
      buildSeconds = (performance.now() - t) / 1000;
      console.log(`next build: ${buildSeconds.toFixed(0)} s`);
      expect(stdout).toMatch(/\/api\/webhooks\/gateway/);
    },
    15 * 60_000,
  );

  it(
    'next start with the key: genuine → 200 processed, again → 200 duplicate, tampered → 401',
    async () => {
      expect(buildSeconds).toBeGreaterThan(0);
      server = await start(
        dir,
        [process.execPath, NEXT, 'start', '-H', '127.0.0.1', '-p', '{PORT}'],
        { NEXT_TELEMETRY_DISABLED: '1' },
        60_000,
      );
      await expectRecipe(`${server.url}/api/webhooks/gateway`, 'nextjs', expect);
      expect(server.output()).toMatch(/^saved nextjs-\S+ \(success\)$/m);
    },
    5 * 60_000,
  );
});
