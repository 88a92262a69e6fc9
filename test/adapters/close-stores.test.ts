/**
 * `closeStores: true`: receiver.close() closes the store it was given (its connections),
 * on real Redis and PostgreSQL servers; without it the store stays open for its other
 * users. Every receiver (Express, Fetch, framework-agnostic) has the option.
 */
import express from 'express';
import supertest from 'supertest';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createReceiver as createAgnosticReceiver } from '../../src/index.js';
import { createReceiver as createExpressReceiver } from '../../src/express.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { createReceiver as createWebReceiver } from '../../src/web.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';

const redisUrl = inject('redisUrl');
const databaseUrl = inject('databaseUrl');
const table = `close_stores_${process.pid}`;
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups) await c();
});

type Store = RedisIdempotencyStore | PostgresIdempotencyStore;
const stores: Array<[string, string, () => Store]> = [
  [
    'Redis',
    redisUrl,
    () =>
      new RedisIdempotencyStore({
        url: redisUrl,
        keyPrefix: `jobhook:test:close:${process.pid}:`,
        log: false,
      }),
  ],
  [
    'PostgreSQL',
    databaseUrl,
    () => new PostgresIdempotencyStore({ connectionString: databaseUrl, table, migrate: true, log: false }),
  ],
];

/** Each receiver, given `store`, handling one genuine delivery: its answer's status. */
const receivers: Array<
  [
    string,
    (store: Store, closeStores?: boolean) => { deliver: () => Promise<number>; close: () => Promise<void> },
  ]
> = [
  [
    'jobhook/express',
    (store, closeStores) => {
      const receiver = createExpressReceiver({
        publicKey: publicPem(2048),
        store,
        closeStores,
        onEvent: () => undefined,
      });
      const app = express().post('/hook', receiver);
      const d = signed(jobId('close-express'));
      const deliver = async () =>
        (
          await supertest(app)
            .post('/hook')
            .set(d.headers)
            .serialize((x: unknown) => x as string)
            .send(d.body)
        ).status;
      return { deliver, close: () => receiver.close() };
    },
  ],
  [
    'jobhook/web',
    (store, closeStores) => {
      const receive = createWebReceiver({
        publicKey: publicPem(2048),
        store,
        closeStores,
        onEvent: () => undefined,
      });
      const d = signed(jobId('close-web'));
      const deliver = async () =>
        (await receive(new Request('http://x/hook', { method: 'POST', headers: d.headers, body: d.body })))
          .status;
      return { deliver, close: () => receive.close() };
    },
  ],
  [
    'jobhook (agnostic)',
    (store, closeStores) => {
      const receive = createAgnosticReceiver({
        publicKey: publicPem(2048),
        store,
        closeStores,
        onEvent: () => undefined,
      });
      const d = signed(jobId('close-agnostic'));
      return { deliver: async () => (await receive(d)).status, close: () => receive.close() };
    },
  ],
];

describe.each(stores)('closeStores with the %s store', (_name, url, makeStore) => {
  it.skipIf(url === '').each(receivers)(
    '%s: close() closes the store; without the option it stays open',
    async (_r, make) => {
      const closing = makeStore();
      const closed = make(closing, true);
      expect(await closed.deliver()).toBe(200);
      await closed.close();
      await expect(closing.ping()).rejects.toThrow();
      await closed.close(); // again: the store is closed once, nothing thrown

      const kept = makeStore();
      const open = make(kept);
      expect(await open.deliver()).toBe(200);
      await open.close();
      await expect(kept.ping()).resolves.toBeUndefined();
      await kept.close();
    },
  );
});

it.skipIf(databaseUrl === '')('(cleanup: the PostgreSQL tables this file made are dropped)', () => {
  cleanups.push(async () => {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(`DROP TABLE IF EXISTS public.${table}, public.${table}_pending`);
    await client.end();
  });
});

it('closeStores must be a boolean', () => {
  expect(() =>
    createAgnosticReceiver({
      publicKey: publicPem(2048),
      onEvent: () => undefined,
      closeStores: 'yes' as never,
    }),
  ).toThrow(/closeStores must be true or false/);
});
