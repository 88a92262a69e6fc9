import express from 'express';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IdempotencyStore } from '../../src/index.js';
import { createReceiver as createExpressReceiver } from '../../src/express.js';
import { createReceiver as createWebReceiver } from '../../src/web.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import type { Throwaway } from '../helpers/servers.js';
import { storeContract } from './contract.js';

export interface ClosableStore extends IdempotencyStore {
  close(): Promise<void>;
}

export interface ServerStoreSuite {
  name: string;
  /** Server for the shared suites ('' = none: skipped with the notice from the global setup). */
  url: string;
  /** Why the suite is skipped, when it is. */
  skipReason?: string;
  /** A new store (own connection) on `url`, ready to use. */
  make: (url: string, options?: { operationTimeoutMs?: number }) => Promise<ClosableStore>;
  /** A private server the fault tests may stop and restart. */
  throwaway: () => Promise<Throwaway>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function serverStoreSuite(s: ServerStoreSuite): void {
  describe.skipIf(s.url === '')(`${s.name} store on a real server`, () => {
    const stores: ClosableStore[] = [];
    let a!: ClosableStore;
    let b!: ClosableStore;
    beforeAll(async () => {
      a = await s.make(s.url);
      b = await s.make(s.url);
      stores.push(a, b);
    });
    afterAll(async () => {
      await Promise.all(stores.map((x) => x.close()));
    });

    storeContract(s.name, () => ({ a, b, shared: true }));

    it('two Express receivers sharing the store: the same job_id sent to both → handler once', async () => {
      let calls = 0;
      const onEvent = async () => {
        calls++;
        await sleep(50);
      };
      const apps = [a, b].map((store) => {
        const app = express();
        app.post('/hook', createExpressReceiver({ publicKey: publicPem(2048), store, onEvent }));
        return app;
      });
      const d = signed(jobId('e2e-express'));
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, k) =>
          supertest(apps[k % 2]!)
            .post('/hook')
            .set(d.headers)
            .send(d.body),
        ),
      );
      expect(calls).toBe(1);
      expect(answers.filter((r) => r.status === 200 && r.body.status === 'processed')).toHaveLength(1);
      expect(
        answers.every(
          (r) =>
            (r.status === 200 && r.body.status === 'duplicate') ||
            r.status === 503 ||
            r.body.status === 'processed',
        ),
      ).toBe(true);
      // Afterwards both instances answer duplicate.
      for (const app of apps)
        expect((await supertest(app).post('/hook').set(d.headers).send(d.body)).body.status).toBe(
          'duplicate',
        );
    });

    it('two Fetch handlers sharing the store: the same job_id sent to both → handler once', async () => {
      let calls = 0;
      const handlers = [a, b].map((store) =>
        createWebReceiver({ publicKey: publicPem(2048), store, onEvent: async () => void calls++ }),
      );
      const d = signed(jobId('e2e-web'));
      const responses = await Promise.all(
        handlers.map((h) =>
          h(new Request('http://127.0.0.1/hook', { method: 'POST', headers: d.headers, body: d.body })),
        ),
      );
      expect(calls).toBe(1);
      const kinds = await Promise.all(
        responses.map(async (r) =>
          `${r.status} ${((await r.json()) as { status?: string }).status ?? ''}`.trim(),
        ),
      );
      expect(kinds.sort()).toEqual(
        kinds.includes('503') ? ['200 processed', '503'] : ['200 duplicate', '200 processed'],
      );
    });
  });

  describe.skipIf(s.skipReason !== undefined)(
    `${s.name} store: server stopped and restarted mid-test`,
    () => {
      let server!: Throwaway;
      let store!: ClosableStore;
      beforeAll(async () => {
        server = await s.throwaway();
        store = await s.make(server.url, { operationTimeoutMs: 1000 });
      });
      afterAll(async () => {
        await store?.close();
        await server?.destroy();
      });

      it('claims reject with STORE_UNAVAILABLE within a bounded time, the receiver answers 503, and both recover on restart', async () => {
        let calls = 0;
        const app = express();
        app.post(
          '/hook',
          createExpressReceiver({ publicKey: publicPem(2048), store, onEvent: () => void calls++ }),
        );
        const first = signed(jobId('fault-before'));
        expect((await supertest(app).post('/hook').set(first.headers).send(first.body)).body.status).toBe(
          'processed',
        );

        await server.stop();
        const t0 = performance.now();
        await expect(store.claim(jobId('fault-down'), { leaseMs: 10_000 })).rejects.toMatchObject({
          code: 'STORE_UNAVAILABLE',
        });
        expect(performance.now() - t0).toBeLessThan(5000);
        const during = signed(jobId('fault-during'));
        const down = await supertest(app).post('/hook').set(during.headers).send(during.body);
        expect({ status: down.status, code: down.body.error?.code }).toEqual({
          status: 503,
          code: 'STORE_UNAVAILABLE',
        });

        await server.start();
        // The client reconnects by itself; the receiver is not restarted.
        let answer: supertest.Response | undefined;
        for (let k = 0; k < 40; k++) {
          answer = await supertest(app).post('/hook').set(during.headers).send(during.body);
          if (answer.status === 200) break;
          await sleep(250);
        }
        expect(answer?.body.status).toBe('processed');
        expect(calls).toBe(2);
      });
    },
  );
}
