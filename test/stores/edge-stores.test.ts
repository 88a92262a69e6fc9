/**
 * The Durable Object store on workerd and the Deno KV store on Deno (issue 35), each inside
 * its own runtime with its storage on disk (test/stores/runtime-stores.ts): the contract and
 * the receivers over the store (server-store-suite.ts), the runtime killed and started again
 * mid-test, and what survives that restart.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  edgeRuntime,
  RemoteStore,
  startRuntime,
  type EdgeRuntime,
  type RuntimeServer,
} from './runtime-stores.js';
import { serverStoreSuite } from './server-store-suite.js';

const run = `${process.pid}-${Date.now()}`;

for (const [name, label] of [
  ['workerd', 'Durable Object (workerd)'],
  ['Deno', 'Deno KV (Deno)'],
] as const satisfies ReadonlyArray<readonly [EdgeRuntime, string]>) {
  const runtime = edgeRuntime(name);
  let shared: RuntimeServer | undefined;
  let n = 0;
  beforeAll(async () => {
    if (runtime.ok) shared = await startRuntime(name);
  }, 60_000);
  afterAll(async () => {
    await shared?.destroy();
  });

  serverStoreSuite({
    name: label,
    url: runtime.ok ? 'started in beforeAll' : '',
    ...(runtime.ok ? {} : { skipReason: runtime.reason }),
    // Each suite its own objects or keys (its scope); `a` and `b` share them, as two connections to one server do.
    make: async (url) =>
      url === 'started in beforeAll'
        ? new RemoteStore(shared!, `suite-${run}`)
        : new RemoteStore({ url }, `restart-${run}-${n++}`),
    throwaway: () => startRuntime(name),
  });

  describe.skipIf(!runtime.ok)(`${label}: killed (SIGKILL) and started again on the same storage`, () => {
    it('keeps completions, claims in progress with their fencing numbers, releases and pending jobs', async () => {
      const server = await startRuntime(name);
      try {
        const store = new RemoteStore(server, `kept-${run}`);
        const done = await store.claim('done', { leaseMs: 60_000 });
        const held = await store.claim('held', { leaseMs: 60_000 });
        const released = await store.claim('released', { leaseMs: 60_000 });
        if (done.status !== 'acquired' || held.status !== 'acquired' || released.status !== 'acquired')
          throw new Error('not acquired');
        expect(await store.complete('done', done.token, { retainMs: 60_000, fence: done.fence })).toBe(
          'completed',
        );
        expect(await store.release('released', released.token)).toBe(true);
        await store.trackPending!('pending', { since: 1_000, userParameters: { k: 1 } });
        await server.kill();
        await expect(store.claim('done', { leaseMs: 60_000 })).rejects.toMatchObject({
          code: 'STORE_UNAVAILABLE',
        });
        await server.start();
        expect(await store.claim('done', { leaseMs: 60_000 })).toEqual({ status: 'completed' });
        expect(await store.claim('held', { leaseMs: 60_000 })).toMatchObject({ status: 'in_progress' });
        expect(await store.renew!('held', held.token, { leaseMs: 60_000 })).toBe('renewed');
        expect(await store.complete('released', released.token, { retainMs: 60_000 })).toBe('superseded');
        expect(await store.listPending!({ before: 2_000 })).toEqual([
          { jobId: 'pending', since: 1_000, userParameters: { k: 1 } },
        ]);
        // The fencing counter goes on from where it was.
        const next = await store.claim('next', { leaseMs: 60_000 });
        expect(next).toMatchObject({ status: 'acquired' });
        expect((next as { fence: number }).fence).toBeGreaterThan(released.fence);
      } finally {
        await server.destroy();
      }
    }, 90_000);
  });
}

describe.skipIf(!edgeRuntime('workerd').ok)(
  'Durable Object store: the class declared without SQLite storage',
  () => {
    it('every call fails with STORE_UNAVAILABLE naming the fix (a new_sqlite_classes migration)', async () => {
      const server = await startRuntime('workerd', { withoutSql: true });
      try {
        const store = new RemoteStore(server, `nosql-${run}`);
        const failed = store.claim('job', { leaseMs: 10_000 });
        await expect(failed).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
        await expect(failed).rejects.toThrow(/new_sqlite_classes/);
      } finally {
        await server.destroy();
      }
    }, 60_000);
  },
);
