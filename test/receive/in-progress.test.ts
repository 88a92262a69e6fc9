/**
 * Replays of a delivery this receiver is processing are answered 503 IN_PROGRESS from
 * memory: the store is claimed once, however many copies arrive while the handler runs.
 */
import { describe, expect, it } from 'vitest';
import { createReceiver, MemoryIdempotencyStore, type IdempotencyStore } from '../../src/index.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';

/** The memory store, counting its claims. */
function countingStore(): { store: IdempotencyStore; claims: () => number } {
  const memory = new MemoryIdempotencyStore();
  let claims = 0;
  return {
    claims: () => claims,
    store: {
      claim: (id, options) => (claims++, memory.claim(id, options)),
      renew: (id, token, options) => memory.renew(id, token, options),
      complete: (id, token, options) => memory.complete(id, token, options),
      release: (id, token) => memory.release(id, token),
    },
  };
}

describe('replays of a delivery in progress here', () => {
  it('are answered 503 IN_PROGRESS with Retry-After without a store claim; the job runs once', async () => {
    const { store, claims } = countingStore();
    let finish!: () => void;
    const gate = new Promise<void>((r) => (finish = r));
    let runs = 0;
    const receive = createReceiver({
      publicKey: publicPem(2048),
      store,
      log: false,
      onEvent: () => (runs++, gate),
    });
    const d = signed(jobId('in-progress'));
    const first = receive(d);
    while (claims() === 0) await new Promise((r) => setTimeout(r, 5));
    const replays = [];
    for (let k = 0; k < 20; k++) replays.push(await receive(d));
    expect(replays.map((a) => [a.status, JSON.parse(a.body).error?.code])).toEqual(
      Array(20).fill([503, 'IN_PROGRESS']),
    );
    for (const a of replays) expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(claims()).toBe(1);
    finish();
    expect((await first).status).toBe(200);
    expect(runs).toBe(1);
    // Once it completed, a replay is a duplicate (answered from the digests known here).
    expect(JSON.parse((await receive(d)).body).status).toBe('duplicate');
    await receive.close();
  });
});
