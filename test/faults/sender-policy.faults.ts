/**
 * The harness sends with its own scheduler (see harness/sender.ts for why); this
 * checks that its retry decisions are those of `sendDelivery`, the library's model
 * of the gateway, on a real loopback server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendDelivery } from '../../src/tools/deliveries/send.js';
import { decide, GATEWAY_POLICY, type GatewayPolicy } from './harness/sender.js';

describe('the harness sender follows sendDelivery’s policy', () => {
  let server!: Server;
  let url!: string;
  let script: Array<number | 'hang'> = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      const next = script.shift() ?? 200;
      if (next === 'hang') return; // no answer: the attempt times out
      res.writeHead(next, { 'content-type': 'application/json' }).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const small: GatewayPolicy = { retries: 3, backoffMs: 5, maxBackoffMs: 12, timeoutMs: 200 };
  const scripts: Array<Array<number | 'hang'>> = [
    [200],
    [404],
    [302],
    [503, 503, 503, 503],
    [500, 'hang', 502, 201],
    [503, 400],
    ['hang', 'hang', 'hang', 'hang'],
  ];

  for (const answers of scripts) {
    it(`answers ${answers.join(', ')}`, async () => {
      script = [...answers];
      const sent = await sendDelivery({
        url,
        headers: { 'content-type': 'application/json' },
        body: '{}',
        ...small,
      });
      const ours = sent.attempts.map((a) => ({ attempt: a.attempt, ...decide(small, a.attempt, a.status) }));
      expect(ours).toEqual(
        sent.attempts.map((a) => ({
          attempt: a.attempt,
          outcome: a.outcome,
          ...(a.delayMs !== undefined ? { delayMs: a.delayMs } : {}),
        })),
      );
    });
  }

  it('uses sendDelivery’s defaults (the gateway’s policy)', () => {
    expect(GATEWAY_POLICY).toEqual({ retries: 3, backoffMs: 1000, maxBackoffMs: 30_000, timeoutMs: 30_000 });
    expect([1, 2, 3].map((n) => decide(GATEWAY_POLICY, n, 503).delayMs)).toEqual([1000, 2000, 4000]);
    expect(decide(GATEWAY_POLICY, 4, undefined)).toEqual({ outcome: 'gave-up' });
  });
});
