/**
 * examples/observability against the packed package, with the real OpenTelemetry SDK and
 * its Prometheus exporter: deliveries show up in the scrape, by outcome; /readyz answers
 * the receiver's health().
 */
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/servers.js';
import { delivery, exampleApp, post, startTs, type Running } from './harness.js';

const cleanup: Array<() => void | Promise<void>> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
});

describe('examples/observability (Prometheus scrape endpoint, readiness probe)', () => {
  it(
    'server.ts: genuine, duplicate and tampered deliveries are counted in /metrics; /readyz says ready',
    async () => {
      const { dir, remove } = await exampleApp('observability');
      cleanup.push(remove);
      const metricsPort = await freePort();
      const server: Running = await startTs(dir, 'server.ts', { METRICS_PORT: String(metricsPort) });
      cleanup.push(() => server.stop());
      const hook = `${server.url}/webhooks/gateway`;
      const d = delivery('observability');
      expect((await post(hook, d.body, d.headers)).status).toBe(200);
      expect((await post(hook, d.body, d.headers)).status).toBe(200);
      expect((await post(hook, d.body.replace('Grüße', 'Gruesse'), d.headers)).status).toBe(401);
      const scrape = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      const count = (outcome: string) => {
        const line = scrape
          .split('\n')
          .find((l) => l.startsWith('jobhook_deliveries') && l.includes(`outcome="${outcome}"`));
        return line === undefined ? 0 : Number(line.split(' ').pop());
      };
      expect(
        { processed: count('processed'), duplicate: count('duplicate'), refused: count('refused') },
        scrape,
      ).toEqual({ processed: 1, duplicate: 1, refused: 1 });
      expect(scrape).toMatch(/jobhook_store_duration_count\{[^}]*op="claim"/);
      // Seconds, in buckets made for seconds (not the SDK's default ones, made for milliseconds).
      expect(scrape).toMatch(/jobhook_verify_duration_bucket\{[^}]*le="0.005"\}/);
      const ready = await fetch(`${server.url}/readyz`);
      // The status only: nothing of the store (its address, its error) to whoever asks.
      expect({ status: ready.status, body: await ready.text() }).toEqual({ status: 200, body: 'OK' });
    },
    15 * 60_000,
  );
});
