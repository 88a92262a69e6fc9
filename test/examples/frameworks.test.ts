/**
 * examples/fastify, examples/koa and examples/hono-node against the packed package:
 * genuine → 200 processed, again → 200 duplicate, tampered → 401, and a 2 MB genuine
 * delivery → 200 (past Fastify's 1 MiB default bodyLimit). Fastify's other JSON route
 * still gets parsed JSON: the raw-body parser is scoped to the webhook route.
 */
import { brotliCompressSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import {
  delivery,
  exampleApp,
  expectLargeDelivery,
  expectRecipe,
  post,
  startTs,
  type Running,
} from './harness.js';

const cleanup: Array<() => void | Promise<void>> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
});

async function serve(example: string, file: string): Promise<Running> {
  const { dir, remove } = await exampleApp(example);
  cleanup.push(remove);
  const server = await startTs(dir, file);
  cleanup.push(() => server.stop());
  return server;
}

describe('examples/fastify', () => {
  it(
    'server.ts: the recipe, 2 MB and 20 MB deliveries, and a JSON route outside the webhook plugin',
    async () => {
      const server = await serve('fastify', 'server.ts');
      const hook = `${server.url}/webhooks/gateway`;
      await expectRecipe(hook, 'fastify', expect);
      await expectLargeDelivery(hook, 'fastify-large', expect);
      const orders = await post(`${server.url}/api/orders`, '{"order":17}', {
        'content-type': 'application/json',
      });
      expect({ status: orders.status, body: JSON.parse(orders.body) }).toEqual({
        status: 200,
        body: { received: { order: 17 } },
      });
      // One per processed delivery: the recipe's, the 2 MB and the 20 MB ones.
      expect(server.output().match(/^saved /gm)).toHaveLength(3);
    },
    15 * 60_000,
  );
});

describe('examples/koa', () => {
  it(
    'server.ts: the recipe, 2 MB and 20 MB deliveries',
    async () => {
      const server = await serve('koa', 'server.ts');
      await expectRecipe(`${server.url}/webhooks/gateway`, 'koa', expect);
      await expectLargeDelivery(`${server.url}/webhooks/gateway`, 'koa-large', expect);
    },
    15 * 60_000,
  );
});

describe('examples/hono-node (@hono/node-server, jobhook/web)', () => {
  it(
    'server.ts: the recipe, 2 MB and 20 MB deliveries, and a br-encoded one (decoded with node:zlib on Node)',
    async () => {
      const server = await serve('hono-node', 'server.ts');
      await expectRecipe(`${server.url}/webhooks/gateway`, 'hono-node', expect);
      await expectLargeDelivery(`${server.url}/webhooks/gateway`, 'hono-node-large', expect);
      const d = delivery('hono-node-br');
      const br = await post(
        `${server.url}/webhooks/gateway`,
        new Uint8Array(brotliCompressSync(Buffer.from(d.body))),
        { ...d.headers, 'content-encoding': 'br' },
      );
      expect({ status: br.status, json: br.json }).toEqual({
        status: 200,
        json: { status: 'processed', job_id: d.jobId },
      });
    },
    15 * 60_000,
  );
});
