/**
 * `jobhook check` (checkReceiver) against the example apps of examples/ as users run
 * them (the packed package installed, each app a process): every delivery passes, the
 * default sizes up to 25 MB included, and each job runs once, counted from what the app
 * ran (its `saved ID` and `failed ID:` lines, which stand in for a database).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { checkReceiver, type CheckReport } from '../../src/testing.js';
import { privatePem } from '../helpers/keys.js';
import { exampleApp, startTs, type Running } from './harness.js';

const cleanup: Array<() => void | Promise<void>> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
});

async function serve(example: string, file: string, env?: Record<string, string>): Promise<Running> {
  const { dir, remove } = await exampleApp(example, { name: `check-${example}-${file.replace(/\W/g, '-')}` });
  cleanup.push(remove);
  const server = await startTs(dir, file, env);
  cleanup.push(() => server.stop());
  return server;
}

/** The job ids the app ran, one per `saved ID` or `failed ID: message` line it printed. */
function effectsOf(server: Running): () => string[] {
  return () => [...server.output().matchAll(/^(?:saved (\S+)|failed (\S+?):)/gm)].map((m) => (m[1] ?? m[2])!);
}

async function check(server: Running, withEffects = true): Promise<CheckReport> {
  const report = await checkReceiver(`${server.url}/webhooks/gateway`, {
    privateKey: privatePem(2048),
    effects: withEffects ? effectsOf(server) : undefined,
    backoffMs: 50,
    maxBackoffMs: 400,
  });
  const failed = report.results
    .filter((r) => r.verdict !== 'passed')
    .map((r) => `${r.id}: ${r.verdict} ${r.meaning}`);
  expect(failed, server.output().slice(-2000)).toEqual([]);
  expect(report.ok).toBe(true);
  return report;
}

const cases: Array<[string, string]> = [
  ['express', 'receiver.ts'],
  ['express', 'after-json.ts'],
  ['express', 'middleware.ts'],
  ['fastify', 'server.ts'],
  ['koa', 'server.ts'],
  ['hono-node', 'server.ts'],
];

describe('jobhook check against the example apps', () => {
  it.each(cases)(
    'examples/%s/%s passes every delivery, each job run once',
    async (example, file) => {
      const report = await check(await serve(example, file));
      expect(report.countedFrom).toBe('effects');
      const large = report.results.filter((r) => r.id.includes('large') || r.bytes > 1_000_000);
      expect(
        report.timing.map((t) => t.status),
        JSON.stringify(large.map((r) => ({ id: r.id, attempts: r.sends[0]?.attempts }))),
      ).toEqual([200, 200, 200, 200, 200]);
      for (const r of report.results) expect(r.runs, r.id).toBe(r.group === 'refuse' ? 0 : 1);
    },
    15 * 60_000,
  );

  it(
    'examples/observability/server.ts passes every delivery (runs from the answers: it records successes only)',
    async () => {
      const { freePort } = await import('../helpers/servers.js');
      const report = await check(
        await serve('observability', 'server.ts', { METRICS_PORT: String(await freePort()) }),
        false,
      );
      expect(report.countedFrom).toBe('answers');
    },
    15 * 60_000,
  );
});
