// The idempotency store, shared by every instance of the receiver: Redis when REDIS_URL is
// set, PostgreSQL when DATABASE_URL is (its tables made at first use); neither: undefined,
// and the receiver keeps its own memory store (one process only).
import { PostgresIdempotencyStore } from 'jobhook/postgres';
import { RedisIdempotencyStore } from 'jobhook/redis';

const { REDIS_URL, DATABASE_URL } = process.env;
export const store = REDIS_URL
  ? new RedisIdempotencyStore({ url: REDIS_URL })
  : DATABASE_URL
    ? new PostgresIdempotencyStore({ connectionString: DATABASE_URL, migrate: true })
    : undefined;
