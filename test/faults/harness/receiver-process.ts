/**
 * One receiver of the receiver-fault suite (issue 18) in a process of its own, so the
 * suite can kill -9 it, SIGSTOP it, or cut its store link: Express + createReceiver
 * on the shared store, the library's defaults (lease 5 s, takeover grace 2 s), and a
 * handler that records each effect in an fsync'd log before it returns.
 *
 * Run as `node --import tsx receiver-process.ts` with an IPC channel. Environment:
 *   PORT, PUBLIC_KEY, STORE (redis | postgres), STORE_URL, TRANSACTIONAL (1: PostgreSQL
 *   transactional mode, the effect row written through context.transaction), LOG_FILE;
 *   optional: INBOX (1: the handler first inserts the job into an inbox table with ON
 *   CONFLICT (job_id) DO NOTHING through the transaction, the README's pattern: a cut-off
 *   transaction holds that key), CLOCK_SKEW_MS (this receiver's clock, ms ahead of the
 *   machine's; negative: behind), MAX_AGE_S, MAX_SKEW_S, RETAIN_MS (the replay window,
 *   the future skew tolerated, the retention).
 *
 * The log (one per process, appended and fsync'd line by line, so a kill -9 loses
 * nothing that was written):
 *   E <epoch ms> <job id> <pid> <fencing token>    an effect was applied (in transactional
 *                                                  mode: written in the transaction, which
 *                                                  may still roll back; the table counts)
 *   R <epoch ms> <job id> <stage> <code> <message> onError (stage superseded: a job that may have run twice)
 *   L <epoch ms> <level> <message>                 the receiver's log, warn and error
 * IPC: { t: 'listening' }, { t: 'start', job }, { t: 'end', job } so the suite can pause
 * a receiver while one of its handlers runs.
 */
import { open } from 'node:fs/promises';
import express from 'express';
import type { IdempotencyStore } from '../../../src/index.js';
import { createReceiver } from '../../../src/express.js';
import { PostgresIdempotencyStore } from '../../../src/postgres.js';
import { RedisIdempotencyStore } from '../../../src/redis.js';
import { EFFECTS_TABLE, INBOX_TABLE, STORE_TABLE, REDIS_KEY_PREFIX, workMsOf } from './process-shared.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined || v === '') throw new Error(`${name} is required`);
  return v;
};

const transactional = process.env.TRANSACTIONAL === '1';
const inbox = process.env.INBOX === '1';
const skewMs = Number(process.env.CLOCK_SKEW_MS ?? 0);
/** The replay window, the skew tolerated and the retention, when the case sets them (else the library's defaults). */
const windowOptions = {
  ...(process.env.MAX_AGE_S === undefined ? {} : { maxAgeSeconds: Number(process.env.MAX_AGE_S) }),
  ...(process.env.MAX_SKEW_S === undefined ? {} : { maxFutureSkewSeconds: Number(process.env.MAX_SKEW_S) }),
  ...(process.env.RETAIN_MS === undefined ? {} : { retainMs: Number(process.env.RETAIN_MS) }),
  ...(skewMs === 0 ? {} : { now: () => Date.now() + skewMs }),
};
const log = await open(env('LOG_FILE'), 'a');
// One fsync at a time (each line is appended with O_APPEND, then made durable before the caller goes on).
let chain: Promise<void> = Promise.resolve();
function record(line: string): Promise<void> {
  const next = chain.then(async () => {
    await log.appendFile(`${line}\n`);
    await log.datasync();
  });
  chain = next.catch(() => undefined);
  return next;
}

const tell = (message: Record<string, unknown>): void => {
  if (process.connected) process.send?.(message, undefined, undefined, () => undefined);
};

let store: IdempotencyStore;
if (env('STORE') === 'redis') {
  store = new RedisIdempotencyStore({ url: env('STORE_URL'), keyPrefix: REDIS_KEY_PREFIX, log: {} });
} else {
  const pg = (await import('pg')).default;
  // Each running handler holds a connection for its transaction (README): a pool above the deliveries at once.
  const pool = new pg.Pool({
    connectionString: env('STORE_URL'),
    max: 24,
    connectionTimeoutMillis: 5000,
    query_timeout: 5000,
    idleTimeoutMillis: 10_000,
  });
  pool.on('error', () => undefined);
  store = new PostgresIdempotencyStore({ pool, table: STORE_TABLE, transactional });
}

const oneLine = (s: string) => s.replace(/\s+/g, ' ').slice(0, 300);
const app = express();
app.post(
  '/webhooks/gateway',
  createReceiver<import('pg').PoolClient>({
    publicKey: env('PUBLIC_KEY'),
    store,
    ...windowOptions,
    log: {
      warn: (message: string) => void record(`L ${Date.now()} warn ${oneLine(message)}`),
      error: (message: string) => {
        process.stderr.write(`${message}\n`);
        void record(`L ${Date.now()} error ${oneLine(message)}`);
      },
    },
    onError: (error, { jobId, stage }) => {
      const e = error as { code?: string; message?: string };
      void record(
        `R ${Date.now()} ${jobId ?? '-'} ${stage} ${e?.code ?? 'error'} ${oneLine(e?.message ?? String(error))}`,
      );
    },
    onEvent: async (event, ctx) => {
      const jobId = ctx.jobId;
      tell({ t: 'start', job: jobId });
      try {
        await new Promise((r) => setTimeout(r, workMsOf(jobId)));
        if (transactional) {
          if (inbox)
            await ctx.transaction!.query(
              `INSERT INTO ${INBOX_TABLE} (job_id) VALUES ($1) ON CONFLICT (job_id) DO NOTHING`,
              [jobId],
            );
          await ctx.transaction!.query(
            `INSERT INTO ${EFFECTS_TABLE} (job_id, pid, fence) VALUES ($1, $2, $3)`,
            [jobId, process.pid, ctx.fencingToken],
          );
        }
        await record(`E ${Date.now()} ${jobId} ${process.pid} ${ctx.fencingToken}`);
      } finally {
        tell({ t: 'end', job: jobId });
      }
    },
  }),
);
const server = app.listen(Number(env('PORT')), '127.0.0.1', () => tell({ t: 'listening' }));
server.keepAliveTimeout = 65_000;
process.on('disconnect', () => process.exit(0));
