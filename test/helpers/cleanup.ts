/**
 * What the tests leave on servers they were given (JOBHOOK_TEST_REDIS_URL,
 * JOBHOOK_TEST_DATABASE_URL): the Redis keys and the PostgreSQL tables, sequences and
 * schemas that did not exist when the run began are removed when it ends. The throwaway
 * servers the tests start themselves are removed whole instead. What existed before the
 * run is never touched; the servers should still be the tests' own (a run beside another
 * on the same database would remove what the other made meanwhile).
 */
import { Redis } from 'ioredis';
import pg from 'pg';

/** Removes, when called, what was made since the snapshot; resolves to what it removed. */
export type Cleanup = () => Promise<{ removed: number }>;

async function redisKeys(redis: Redis): Promise<Set<string>> {
  const keys = new Set<string>();
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    for (const k of batch) keys.add(k);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

/** The keys of the Redis database at `url` now; the cleanup deletes every key made since. */
export async function snapshotRedis(url: string): Promise<Cleanup> {
  const connect = () => new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  const before = await withRedis(connect(), redisKeys);
  return () =>
    withRedis(connect(), async (redis) => {
      const made = [...(await redisKeys(redis))].filter((k) => !before.has(k));
      for (let i = 0; i < made.length; i += 500) await redis.unlink(...made.slice(i, i + 500));
      return { removed: made.length };
    });
}

async function withRedis<T>(redis: Redis, use: (r: Redis) => Promise<T>): Promise<T> {
  await redis.connect();
  try {
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}

/** Tables, sequences and schemas of the user's schemas, as `kind:schema.name` (quoted for SQL). */
const OBJECTS = `
  SELECT CASE c.relkind WHEN 'S' THEN 'sequence' ELSE 'table' END || ':' ||
         quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS object
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.relkind IN ('r', 'p', 'S')
     AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
  UNION ALL
  SELECT 'schema:' || quote_ident(nspname) FROM pg_namespace
   WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\\_%'`;

async function pgObjects(client: pg.Client): Promise<Set<string>> {
  return new Set((await client.query<{ object: string }>(OBJECTS)).rows.map((r) => r.object));
}

async function withPg<T>(url: string, use: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** The tables, sequences and schemas of the database at `url` now; the cleanup drops those made since. */
export async function snapshotPostgres(url: string): Promise<Cleanup> {
  const before = await withPg(url, pgObjects);
  return () =>
    withPg(url, async (client) => {
      const made = [...(await pgObjects(client))].filter((o) => !before.has(o));
      // Schemas last, with what they hold; tables before sequences (a serial column owns its sequence).
      const order = ['table', 'sequence', 'schema'];
      made.sort((a, b) => order.indexOf(a.split(':')[0]!) - order.indexOf(b.split(':')[0]!));
      for (const object of made) {
        const [kind, name] = [object.slice(0, object.indexOf(':')), object.slice(object.indexOf(':') + 1)];
        await client.query(`DROP ${kind.toUpperCase()} IF EXISTS ${name} CASCADE`);
      }
      return { removed: made.length };
    });
}
