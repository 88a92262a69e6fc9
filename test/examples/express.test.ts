/**
 * examples/express on Express 4 and 5, against the packed package: the receiver
 * mounted before express.json(), the middleware with a flow of its own, and the
 * express.json({ verify: keepRawBody, limit }) fallback with a 2 MB delivery.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleApp, expectLargeDelivery, expectRecipe, post, startTs, type Running } from './harness.js';

const flavours: Array<{ name: string; app: string; links: Record<string, string> }> = [
  { name: 'Express 5', app: 'express5', links: {} },
  { name: 'Express 4', app: 'express4', links: { express: 'express4' } },
];

describe.each(flavours)('examples/express on $name', ({ app, links }) => {
  let dir: string;
  let remove: () => void;
  const running: Running[] = [];
  const run = async (file: string) => {
    const r = await startTs(dir, file);
    running.push(r);
    return r;
  };
  beforeAll(async () => {
    ({ dir, remove } = await exampleApp('express', { name: app, links }));
  }, 15 * 60_000);
  afterAll(async () => {
    await Promise.all(running.map((r) => r.stop()));
    remove?.();
  });

  it('receiver.ts: genuine → 200 processed, again → 200 duplicate, tampered → 401; 2 MB and 20 MB → 200; the JSON route still parses', async () => {
    const server = await run('receiver.ts');
    await expectRecipe(`${server.url}/webhooks/gateway`, `${app}-receiver`, expect);
    await expectLargeDelivery(`${server.url}/webhooks/gateway`, `${app}-receiver-large`, expect);
    const orders = await post(`${server.url}/api/orders`, '{"order":17}', {
      'content-type': 'application/json',
    });
    expect({ status: orders.status, body: JSON.parse(orders.body) }).toEqual({
      status: 200,
      body: { received: { order: 17 } },
    });
    // One per processed delivery: the recipe's, the 2 MB and the 20 MB ones.
    expect(server.output().match(/^saved /gm)).toHaveLength(3);
  });

  it('middleware.ts: the same answers from a flow of its own', async () => {
    const server = await run('middleware.ts');
    await expectRecipe(`${server.url}/webhooks/gateway`, `${app}-middleware`, expect);
    expect(server.output().match(/^saved /gm)).toHaveLength(1);
  });

  it('after-json.ts (express.json with keepRawBody and a limit): the same, and 2 MB and 20 MB deliveries → 200, not 413', async () => {
    const server = await run('after-json.ts');
    await expectRecipe(`${server.url}/webhooks/gateway`, `${app}-after-json`, expect);
    await expectLargeDelivery(`${server.url}/webhooks/gateway`, `${app}-after-json-large`, expect);
    const orders = await post(`${server.url}/api/orders`, '{"order":17}', {
      'content-type': 'application/json',
    });
    expect(JSON.parse(orders.body)).toEqual({ received: { order: 17 } });
  });
});
