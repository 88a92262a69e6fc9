/**
 * Every recipe's process exits on SIGTERM with a Redis and with a PostgreSQL store
 * (issue 38: the README's `server.close(() => void receiver.close())` left the Redis
 * connection open and the process alive 30 s later). Each recipe runs against the packed
 * package with REDIS_URL or DATABASE_URL set (its store.ts), takes a genuine delivery (so
 * the store is connected and used), gets SIGTERM, and must exit by itself with code 0.
 * The time it took is printed, not asserted (a loaded machine); the timeout is generous.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../helpers/servers.js';
import { delivery, exampleApp, post, start, TSX, type Running } from './harness.js';

const redisUrl = inject('redisUrl');
const databaseUrl = inject('databaseUrl');
for (const [name, url] of [
  ['Redis', redisUrl],
  ['PostgreSQL', databaseUrl],
] as const) {
  if (url === '' && process.env.CI === 'true')
    throw new Error(`the shutdown tests need ${name}, which CI installs`);
  if (url === '')
    console.warn(`\n[jobhook] recipe shutdown with ${name} skipped: no server (see CONTRIBUTING.md)\n`);
}

/** The recipes that run as a process of their own: example folder, file. */
const recipes: Array<[string, string]> = [
  ['express', 'receiver.ts'],
  ['express', 'after-json.ts'],
  ['fastify', 'server.ts'],
  ['koa', 'server.ts'],
  ['hono-node', 'server.ts'],
  ['observability', 'server.ts'],
  ['production', 'server.ts'],
];
const stores: Array<{ store: string; env: Record<string, string>; skip: boolean }> = [
  { store: 'Redis', env: { REDIS_URL: redisUrl }, skip: redisUrl === '' },
  { store: 'PostgreSQL', env: { DATABASE_URL: databaseUrl }, skip: databaseUrl === '' },
];

const apps = new Map<string, Promise<{ dir: string; remove: () => void }>>();
const appFor = (example: string) => {
  if (!apps.has(example)) apps.set(example, exampleApp(example, { name: `${example}-shutdown` }));
  return apps.get(example)!;
};
const running: Running[] = [];
afterAll(async () => {
  await Promise.all(running.map((r) => r.stop()));
  for (const app of apps.values()) (await app).remove();
});

describe.each(stores)('recipes with the $store store: SIGTERM ends the process', ({ store, env, skip }) => {
  it.skipIf(skip).each(recipes)(
    `examples/%s/%s exits by itself after SIGTERM (${store})`,
    async (example, file) => {
      const { dir } = await appFor(example);
      // METRICS_PORT: observability's exporter; GATEWAY_*: production's client (never called within the test).
      const extra: Record<string, string> = {
        ...env,
        METRICS_PORT: String(await freePort()),
        GATEWAY_URL: 'http://127.0.0.1:9',
        GATEWAY_TOKEN: 'unused',
      };
      const server = await start(dir, [process.execPath, TSX, file], extra);
      running.push(server);
      const d = delivery(`shutdown-${example}-${store}`);
      const answer = await post(`${server.url}/webhooks/gateway`, d.body, d.headers);
      expect({ status: answer.status, json: answer.json }, server.output()).toEqual({
        status: 200,
        json: { status: 'processed', job_id: d.jobId },
      });
      const exit = await server.terminate(20_000);
      console.log(`[shutdown] examples/${example}/${file} with ${store}: exited ${exit.ms} ms after SIGTERM`);
      expect({ alive: exit.alive, code: exit.code }, server.output()).toEqual({ alive: false, code: 0 });
    },
    15 * 60_000,
  );
});
