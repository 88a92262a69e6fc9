/**
 * `npm test` on servers it was given (JOBHOOK_TEST_REDIS_URL, JOBHOOK_TEST_DATABASE_URL)
 * removes what it made there, and nothing else (test/helpers/cleanup.ts, run by the global
 * setup): here on throwaway servers of this file's own, with real stores writing to them.
 */
import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { Redis } from 'ioredis';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { snapshotPostgres, snapshotRedis } from '../helpers/cleanup.js';
import { availability, startPostgres, startRedis, type Throwaway } from '../helpers/servers.js';

const servers: Throwaway[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.destroy()));
});

describe.skipIf(availability('redis').skip)('on a Redis the tests were given', () => {
  it('the keys made during the run are deleted, those there before are kept', async () => {
    const server = await startRedis();
    servers.push(server);
    const redis = new Redis(server.url);
    await redis.set('theirs:kept', '1');
    const cleanup = await snapshotRedis(server.url);
    const store = new RedisIdempotencyStore({ url: server.url, keyPrefix: 'cleanup:', log: false });
    const claim = await store.claim('job-1', { leaseMs: 5_000 });
    if (claim.status !== 'acquired') throw new Error(`claim: ${claim.status}`);
    await store.complete('job-1', claim.token, { retainMs: 86_400_000 });
    await store.close();
    const made = (await redis.keys('*')).length - 1;
    expect(made).toBeGreaterThan(0);
    expect(await cleanup()).toEqual({ removed: made });
    expect(await redis.keys('*')).toEqual(['theirs:kept']);
    redis.disconnect();
  });
});

describe.skipIf(availability('postgres').skip)('on a PostgreSQL database the tests were given', () => {
  it('the tables, sequences and schemas made during the run are dropped, those there before are kept', async () => {
    const server = await startPostgres();
    servers.push(server);
    const client = new pg.Client({ connectionString: server.url });
    client.on('error', () => undefined); // the server is stopped at the end of the file
    await client.connect();
    await client.query('CREATE TABLE theirs (id int)');
    const cleanup = await snapshotPostgres(server.url);
    await client.query('CREATE SCHEMA jobhook_other');
    for (const schema of ['public', 'jobhook_other']) {
      const store = new PostgresIdempotencyStore({ connectionString: server.url, schema, log: false });
      await store.migrate();
      await store.close();
    }
    const tables = async () =>
      (
        await client.query<{ name: string }>(
          `SELECT table_schema || '.' || table_name AS name FROM information_schema.tables
            WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`,
        )
      ).rows.map((r) => r.name);
    expect((await tables()).length).toBeGreaterThan(1);
    const { removed } = await cleanup();
    expect(removed).toBeGreaterThan(0);
    expect(await tables()).toEqual(['public.theirs']);
    const schemas = await client.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'jobhook_other'`);
    expect(schemas.rowCount).toBe(0);
    await client.end();
  });
});
