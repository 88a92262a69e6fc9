import { describe, expect, it } from 'vitest';
import { MemoryIdempotencyStore } from '../../src/index.js';
import { storeContract } from '../stores/contract.js';

storeContract('memory', () => {
  const store = new MemoryIdempotencyStore();
  return { a: store, b: store, shared: true };
});

describe('MemoryIdempotencyStore specifics', () => {
  it('evicts the oldest completed marks first and never a claim in progress', async () => {
    let now = 1_000;
    const store = new MemoryIdempotencyStore({ maxEntries: 3, now: () => now });
    const done = async (job: string) => {
      const c = await store.claim(job, { leaseMs: 1000 });
      if (c.status !== 'acquired') throw new Error(c.status);
      await store.complete(job, c.token, { retainMs: 60_000 });
      now += 1;
    };
    await done('old');
    await done('newer');
    expect((await store.claim('running', { leaseMs: 60_000 })).status).toBe('acquired');
    // Full: the next claim evicts 'old', the oldest completed mark.
    expect((await store.claim('next', { leaseMs: 60_000 })).status).toBe('acquired');
    expect(store.size).toBe(3);
    expect((await store.claim('newer', { leaseMs: 1 })).status).toBe('completed');
    expect((await store.claim('running', { leaseMs: 1 })).status).toBe('in_progress');
    // 'old' was forgotten, so it can be claimed again; that evicts 'newer'.
    expect((await store.claim('old', { leaseMs: 60_000 })).status).toBe('acquired');
    // Now full of claims in progress: a new job is refused with the store error code, never a live claim evicted.
    await expect(store.claim('one-more', { leaseMs: 60_000 })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    });
    for (const job of ['running', 'next', 'old'])
      expect((await store.claim(job, { leaseMs: 1 })).status).toBe('in_progress');
  });

  it('makes room from expired claims', async () => {
    let now = 0;
    const store = new MemoryIdempotencyStore({ maxEntries: 2, now: () => now });
    await store.claim('a', { leaseMs: 10 });
    await store.claim('b', { leaseMs: 1000 });
    now = 20;
    // 'a' expired: its place goes to 'c'.
    expect((await store.claim('c', { leaseMs: 1000 })).status).toBe('acquired');
    expect(store.size).toBe(2);
    // Full of live claims again: refused.
    await expect(store.claim('a', { leaseMs: 1000 })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    now = 2000;
    expect((await store.claim('a', { leaseMs: 1000 })).status).toBe('acquired');
  });

  it('starts no timer (never keeps the process alive)', async () => {
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const store = new MemoryIdempotencyStore();
    for (let k = 0; k < 100; k++) {
      const c = await store.claim(`t${k}`, { leaseMs: 60_000 });
      if (c.status === 'acquired') await store.complete(`t${k}`, c.token, { retainMs: 60_000 });
    }
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(before);
  });
});
