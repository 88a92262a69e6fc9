/**
 * Receivers whose clocks differ (by up to the skew jobhook tolerates) agree on a replay:
 * the store keeps a completion until the replay window closes on the event on every one
 * of them, so a replay one of them still takes inside its window finds the job done.
 * Real receivers sharing one store, real time (a 6 s window).
 */
import { describe, expect, it } from 'vitest';
import { createReceiver, MemoryIdempotencyStore, signDelivery } from '../../src/index.js';
import { payloadText } from '../helpers/deliveries.js';
import { privatePem, publicPem } from '../helpers/keys.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('receivers with clocks apart', () => {
  it(
    'a replay past the window on the processing clock, still inside it on a clock 3 s behind, is a duplicate there',
    { timeout: 20_000 },
    async () => {
      const store = new MemoryIdempotencyStore();
      const runs: string[] = [];
      const options = {
        publicKey: publicPem(2048),
        store,
        retainMs: 6_000,
        maxAgeSeconds: 6,
        maxFutureSkewSeconds: 4,
        log: false as const,
      };
      const a = createReceiver({ ...options, onEvent: () => void runs.push('A') });
      // B's clock 3 s behind A's (within the 4 s tolerated).
      const b = createReceiver({
        ...options,
        now: () => Date.now() - 3_000,
        onEvent: () => void runs.push('B'),
      });
      const finishedAt = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      const d = signDelivery(
        payloadText(`skew-${process.pid}-${Date.now()}`).replace(
          /"finished_at":"[^"]+"/,
          `"finished_at":"${finishedAt}"`,
        ),
        privatePem(2048),
      );
      const finished = Date.parse(finishedAt);
      expect(JSON.parse((await a(d)).body)).toMatchObject({ status: 'processed' });
      // Past the window on A's clock (6 s) and past receipt + window (where a mark kept for the
      // window alone ends), not on B's clock (about 4.5 s).
      await sleep(Math.max(0, finished + 7_500 - Date.now()));
      expect(JSON.parse((await a(d)).body)).toMatchObject({ error: { code: 'EVENT_TOO_OLD' } });
      const onB = await b(d);
      expect({ status: onB.status, body: JSON.parse(onB.body) }).toMatchObject({
        status: 200,
        body: { status: 'duplicate' },
      });
      expect(runs).toEqual(['A']);
      await Promise.all([a.close(), b.close()]);
    },
  );
});
