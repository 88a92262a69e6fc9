/**
 * examples/production (docs/production.md) against the packed package, on real servers,
 * with the gateway simulator as the gateway: a job created through the app is delivered
 * and run once; a job whose every delivery attempt met a stopped receiver (an outage
 * longer than the gateway's retries) is recovered by the reconciler of the next start;
 * /healthz and /readyz tell status and counts only, also while the store is down; SIGTERM
 * ends the process. Once with PostgreSQL, once with a throwaway Redis.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startGatewaySimulator, type GatewaySimulator } from '../../src/testing.js';
import { startRedis, redisBinary, type FaultableServer } from '../helpers/servers.js';
import { exampleApp, start, TSX, type Running } from './harness.js';

const databaseUrl = inject('databaseUrl');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, get: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = get();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const variants = [
  { store: 'PostgreSQL', skip: databaseUrl === '' },
  { store: 'Redis', skip: redisBinary() === undefined },
];

describe.each(variants)('examples/production with $store', ({ store, skip }) => {
  let dir: string;
  let remove: () => void;
  let gateway: GatewaySimulator;
  let redis: FaultableServer | undefined;
  const running: Running[] = [];
  beforeAll(async () => {
    if (skip) return;
    ({ dir, remove } = await exampleApp('production', { name: `production-${store}` }));
    gateway = await startGatewaySimulator({ delayMs: 1_500, backoffMs: 20, maxBackoffMs: 50 });
    if (store === 'Redis') redis = await startRedis();
  }, 15 * 60_000);
  afterAll(async () => {
    await Promise.all(running.map((r) => r.stop()));
    await gateway?.close();
    await redis?.destroy();
    remove?.();
  });

  const run = async (env: Record<string, string> = {}) => {
    const server = await start(dir, [process.execPath, TSX, 'server.ts'], {
      ...(store === 'Redis' ? { REDIS_URL: redis!.url } : { DATABASE_URL: databaseUrl }),
      GATEWAY_URL: gateway.url,
      GATEWAY_TOKEN: gateway.token,
      GATEWAY_PUBLIC_KEY: gateway.publicKey,
      WEBHOOK_URL: 'http://127.0.0.1:{PORT}/webhooks/gateway',
      ...env,
    });
    running.push(server);
    return server;
  };
  const createJob = async (server: Running) => {
    const res = await fetch(`${server.url}/api/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'ocr/ocr_async/amazon',
        input: { file_url: 'https://example.com/a.pdf' },
      }),
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { public_id: string }).public_id;
  };

  it.skipIf(skip)(
    'a job is delivered and run once; one lost to an outage is recovered by the reconciler; health tells counts only; SIGTERM exits',
    async () => {
      // 1. Delivered by webhook, run once.
      const first = await run();
      const delivered = await createJob(first);
      expect((await gateway.waitForDelivery(delivered)).outcome).toBe('delivered');
      await until('the handler', () =>
        first.output().includes(`ran ${delivered} (webhook)`) ? true : undefined,
      );

      // 2. Health and readiness: status and counts, nothing else.
      const healthz = await fetch(`${first.url}/healthz`);
      expect({ status: healthz.status, body: await healthz.json() }).toEqual({
        status: 200,
        body: { ok: true, pending: 0 },
      });
      const readyz = await fetch(`${first.url}/readyz`);
      expect({ status: readyz.status, body: await readyz.json() }).toEqual({
        status: 200,
        body: { ok: true, repairQueue: 0, workers: { busy: 0, queued: 0 } },
      });

      // 3. A job created, then the receiver stopped before it finished: every attempt fails, the gateway gives up.
      const lost = await createJob(first);
      const exit = await first.terminate(20_000);
      expect({ alive: exit.alive, code: exit.code }, first.output()).toEqual({ alive: false, code: 0 });
      expect((await gateway.waitForDelivery(lost)).outcome).toBe('gave-up');

      // 4. The next start's reconciler polls it and runs it, once, through the same claim.
      const second = await run({ RECONCILE_GRACE_MS: '0', RECONCILE_INTERVAL_MS: '200' });
      await until('the reconciler', () =>
        second.output().includes(`ran ${lost} (poll)`) ? true : undefined,
      );
      await sleep(600); // a few more rounds: the job is no longer pending, nothing runs again
      expect(second.output().match(/^ran /gm), second.output()).toEqual([`ran `]);
      expect(second.output()).not.toContain(`ran ${delivered}`);

      // 5. The store down (Redis: its server stopped): 503, and still nothing but status and counts.
      if (redis !== undefined) {
        await redis.stop();
        const down = await fetch(`${second.url}/readyz`);
        const text = await down.text();
        expect(down.status).toBe(503);
        expect(Object.keys(JSON.parse(text) as object).sort()).toEqual(['ok', 'repairQueue', 'workers']);
        expect(text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|redis/i);
        await redis.start();
      }
      const end = await second.terminate(20_000);
      expect({ alive: end.alive, code: end.code }, second.output()).toEqual({ alive: false, code: 0 });
    },
    15 * 60_000,
  );
});
