/**
 * examples/fastify, examples/koa and examples/hono-node against the packed package:
 * genuine → 200 processed, again → 200 duplicate, tampered → 401, and a 2 MB genuine
 * delivery → 200 (past Fastify's 1 MiB default bodyLimit). Fastify's other JSON route
 * still gets parsed JSON: the raw-body parser is scoped to the webhook route.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { exampleApp, expectLargeDelivery, expectRecipe, post, startTs, type Running } from './harness.js';

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
  it('server.ts: the recipe, a 2 MB delivery, and a JSON route outside the webhook plugin', async () => {
    const server = await serve('fastify', 'server.ts');
    const hook = `${server.url}/webhooks/gateway`;
    await expectRecipe(hook, 'fastify', expect);
    await expectLargeDelivery(hook, 'fastify-large', expect);
    const orders = await post(`${server.url}/api/orders`, '{"order":17}', { 'content-type': 'application/json' });
    expect({ status: orders.status, body: JSON.parse(orders.body) }).toEqual({ status: 200, body: { received: { order: 17 } } });
    expect(server.output().match(/^saved /gm)).toHaveLength(2);
  }, 15 * 60_000);
});

describe('examples/koa', () => {
  it('server.ts: the recipe and a 2 MB delivery', async () => {
    const server = await serve('koa', 'server.ts');
    await expectRecipe(`${server.url}/webhooks/gateway`, 'koa', expect);
    await expectLargeDelivery(`${server.url}/webhooks/gateway`, 'koa-large', expect);
  }, 15 * 60_000);
});

describe('examples/hono-node (@hono/node-server, jobhook/web)', () => {
  it('server.ts: the recipe and a 2 MB delivery', async () => {
    const server = await serve('hono-node', 'server.ts');
    await expectRecipe(`${server.url}/webhooks/gateway`, 'hono-node', expect);
    await expectLargeDelivery(`${server.url}/webhooks/gateway`, 'hono-node-large', expect);
  }, 15 * 60_000);
});
