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
 *
 * SQLite (STORE=sqlite, STORE_URL the database file; the effects table in the same file,
 * written through context.transaction when TRANSACTIONAL=1). KILL_AT makes the process
 * SIGKILL itself at the first such point once KILL_AFTER_MS have passed since it began to
 * listen (default 2–5 s, drawn at start; the suite restarts it):
 *   handler   mid-handler, once its effect is written (the log line; the row, uncommitted)
 *   complete  between the handler and its completion (before complete(), or the
 *             transaction's completion statement)
 *   commit    during the completion's commit: a thread of the process sends SIGKILL
 *             0–3 ms after the completion's write transaction starts (its COMMIT waits for
 *             the fsync), so the kill lands before, during or right after the commit
 */
import { open } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import express from 'express';
import type { IdempotencyStore } from '../../../src/index.js';
import type { StoreTransaction, TransactionalStore } from '../../../src/lib/jobs/store.js';
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
const killAt = killAtOf(process.env.KILL_AT);
/**
 * KILL_AT: when the kill is armed (the first kill point after it fires): 2–5 s after the
 * process listens unless KILL_AFTER_MS says (counted from listening: a start slowed by the
 * machine's load must not leave the receiver up for a moment only).
 */
const killAfterMs = Number(process.env.KILL_AFTER_MS ?? 2000 + Math.floor(Math.random() * 3000));
let killArmedAt = Infinity;
const killDue = () => Date.now() >= killArmedAt;
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
if (env('STORE') === 'sqlite') {
  const { SqliteIdempotencyStore } = await import('../../../src/sqlite.js');
  store = killing(new SqliteIdempotencyStore({ path: env('STORE_URL'), table: STORE_TABLE, transactional }));
} else if (env('STORE') === 'redis') {
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
        if (transactional && env('STORE') === 'sqlite') {
          (ctx.transaction as unknown as { run(sql: string, ...p: unknown[]): unknown }).run(
            `INSERT INTO ${EFFECTS_TABLE} (job_id, pid, fence) VALUES (?, ?, ?)`,
            jobId,
            process.pid,
            ctx.fencingToken,
          );
        } else if (transactional) {
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
        if (killAt === 'handler' && killDue()) process.kill(process.pid, 'SIGKILL');
      } finally {
        tell({ t: 'end', job: jobId });
      }
    },
  }),
);
const server = app.listen(Number(env('PORT')), '127.0.0.1', () => {
  killArmedAt = Date.now() + killAfterMs;
  tell({ t: 'listening' });
});
server.keepAliveTimeout = 65_000;
process.on('disconnect', () => process.exit(0));

// --- KILL_AT: this process kills itself (SIGKILL) at one point of a job, once armed.

function killAtOf(value: string | undefined): 'handler' | 'complete' | 'commit' | undefined {
  if (value === undefined || value === '') return undefined;
  if (value === 'handler' || value === 'complete' || value === 'commit') return value;
  throw new Error(`KILL_AT must be handler, complete or commit; got ${value}`);
}

/** A thread that, told to, waits 0–3 ms and sends SIGKILL to this process (while its main thread is inside a commit). */
function killerThread(): () => void {
  const cell = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
     const cell = new Int32Array(workerData);
     Atomics.wait(cell, 0, 0);
     Atomics.wait(cell, 1, 0, Math.random() * 3);
     process.kill(process.pid, 'SIGKILL');`,
    { eval: true, workerData: cell.buffer },
  );
  worker.unref();
  return () => {
    Atomics.store(cell, 0, 1);
    Atomics.notify(cell, 0);
  };
}

/** The store with the kill points of KILL_AT around its completion (and the transaction's). */
function killing(inner: IdempotencyStore & Partial<TransactionalStore>): IdempotencyStore {
  if (killAt === undefined || killAt === 'handler') return inner;
  const trigger = killAt === 'commit' ? killerThread() : undefined;
  const due = killDue;
  const before = (then: () => void) => {
    if (killAt === 'complete') process.kill(process.pid, 'SIGKILL');
    else then();
  };
  const wrapped: IdempotencyStore & Partial<TransactionalStore> = {
    claim: (...a) => inner.claim(...a),
    renew: (...a) => inner.renew!(...a),
    release: (...a) => inner.release(...a),
    complete: (jobId, token, options) => {
      if (due()) before(trigger!);
      return inner.complete(jobId, token, options);
    },
  };
  if (inner.begin !== undefined && inner.transactional === true) {
    Object.defineProperty(wrapped, 'transactional', { value: true, enumerable: true });
    wrapped.begin = async (jobId, token, options) => {
      const tx: StoreTransaction = await inner.begin!(jobId, token, options);
      let last = false;
      return {
        client: tx.client,
        complete: (o) => {
          last = due();
          if (last && killAt === 'complete') process.kill(process.pid, 'SIGKILL');
          return tx.complete(o);
        },
        commit: () => {
          if (last) trigger!();
          return tx.commit();
        },
        rollback: () => tx.rollback(),
      };
    };
  }
  return wrapped;
}
