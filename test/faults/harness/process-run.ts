/**
 * One case of the receiver-fault suite (issue 18): a throwaway store, three receiver
 * processes sharing it, the gateway-like sender, one kind of fault, then the
 * reconciler, then counting effects from the receivers' fsync'd logs (and, in
 * transactional mode, from the effects table, which is what counts there).
 */
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'node:fs/promises';
import { type IdempotencyStore } from '../../../src/index.js';
import { createReconciler, type GatewayClient } from '../../../src/gateway.js';
import { PostgresIdempotencyStore } from '../../../src/postgres.js';
import { RedisIdempotencyStore } from '../../../src/redis.js';
import { SqliteIdempotencyStore } from '../../../src/sqlite.js';
import { sqliteEffects, sqliteFile } from './sqlite-file.js';
import { publicPem } from '../../helpers/keys.js';
import { freePort, startPostgres, startRedis, type FaultableServer } from '../../helpers/servers.js';
import type { Corpus } from './corpus.js';
import { startPgProxy, type PgProxy } from '../../helpers/pg-proxy.js';
import { EFFECTS_TABLE, INBOX_TABLE, REDIS_KEY_PREFIX, STORE_TABLE } from './process-shared.js';
import {
  killSlot,
  readLogs,
  signalSlot,
  startProxy,
  startSlot,
  type BlackholeProxy,
  type EffectLine,
  type ReceiverSlot,
} from './processes.js';
import { sendAll, type AttemptRecord, type GatewayPolicy } from './sender.js';

export type ProcessFault =
  | { kind: 'kill-every'; everyMs: number }
  | { kind: 'sigstop'; ms: number }
  | { kind: 'blackhole'; ms: number }
  | { kind: 'store-pause'; ms: number }
  | { kind: 'store-crash'; ms: number }
  /**
   * PostgreSQL transactional (issue 27): receiver 0's store link goes through the
   * statement-aware proxy (test/helpers/pg-proxy.ts), which resets or black-holes the
   * connection of a handler's transaction `at` its completion statement (before it reaches
   * the server) or mid-handler (once the handler's row was written), `times` times within
   * `ms`; `blackhole-all`: every connection of receiver 0 goes silent at that moment (its
   * claims cannot even be released). What was black-holed stays silent (the server keeps
   * the sessions) until `ms` has passed. The handlers use the README's inbox pattern (INBOX=1).
   */
  | {
      kind: 'tx-cut';
      at: 'complete' | 'handler';
      fault: 'reset' | 'blackhole' | 'blackhole-all';
      times: number;
      ms: number;
    }
  /**
   * Receiver 1's clock `skewS` behind the others' (the skew tolerated, maxFutureSkewSeconds),
   * replay window `windowS`, retention the window: after the load, every delivery is sent
   * again to receivers 0 and 1 when it is 1.5 s short of and past the end of the window
   * on each clock (a fresh load, signed at the start of the case).
   */
  | { kind: 'skew'; skewS: number; windowS: number }
  /**
   * SQLite: each receiver SIGKILLs itself `at` a point of one of its jobs (KILL_AT in
   * receiver-process.ts: mid-handler, between the handler and its completion, during the
   * completion's commit) 2–5 s after it began to listen, and is restarted at once, until the
   * load has been sent.
   */
  | { kind: 'self-kill'; at: 'handler' | 'complete' | 'commit' };

export interface ProcessCaseDef {
  id: string;
  title: string;
  store: 'redis' | 'postgres' | 'sqlite';
  /** PostgreSQL or SQLite `transactional: true`, the effect written through `context.transaction`. */
  transactional: boolean;
  fault: ProcessFault;
  /** The load to send instead of the suite's (built when the case starts: the skew case's events must be fresh). */
  freshCorpus?: () => Corpus;
}

export interface ProcessRunConfig {
  receivers: number;
  /** Most attempts in flight. */
  concurrency: number;
  /** Jobs per second offered. */
  ratePerSecond: number;
  policy: GatewayPolicy;
  /** Share of the deliveries started before a one-off fault (pause, black hole, store fault). */
  faultAt: number;
  /** The receivers' lease (their default), for the crash windows. */
  leaseMs: number;
  takeoverGraceMs: number;
}

export interface FaultWindow {
  what: string;
  slot?: number;
  /** Epoch ms. */
  from: number;
  to: number;
}

export interface ProcessCaseResult {
  id: string;
  title: string;
  store: string;
  fault: string;
  transactional: boolean;
  deliveries: number;
  distinctJobs: number;
  attempts: number;
  answers2xx: number;
  answers4xx: number;
  answers5xx: number;
  noAnswer: number;
  gaveUp: number;
  answers: Record<string, number>;
  /** Jobs with no effect once the gateway was done (before the reconciler). */
  lostBeforeReconciler: number;
  /** Jobs the reconciler ran. */
  reconcilerProcessed: number;
  reconcilerRounds: number;
  /** Jobs with no effect at the end (transactional: no row in the effects table). */
  lost: number;
  /** Jobs with more than one effect (transactional: rows). */
  runTwice: number;
  /** Of those, with a `superseded` report (onError) naming the job. */
  reportedDoubles: number;
  silentDoubles: number;
  /** Doubles whose first effect lies outside every fault window. */
  doublesOutsideWindow: number;
  /**
   * Jobs whose handler ran more than once (its fsync'd log line, written after the row went
   * into the transaction: an effect outside it), and of those, with no `superseded` report.
   * In the other modes the same as runTwice and silentDoubles.
   */
  outsideDoubles: number;
  silentOutsideDoubles: number;
  /** superseded reports, and jobs they named. */
  supersededReports: number;
  supersededJobs: number;
  /** Transactional mode: handler runs whose effect was written in a transaction (committed or rolled back). */
  handlerEffects: number;
  /** Effects counted (rows in transactional mode). */
  effects: number;
  receiverRestarts: number;
  windows: Array<{ what: string; slot?: number; fromS: number; toS: number }>;
  receiverLog: Record<string, number>;
  reportsByStage: Record<string, number>;
  sendSeconds: number;
  /** Lost and doubled jobs, with what happened to them. */
  lostJobs: Array<{ jobId: string; story: string }>;
  doubledJobs: Array<{ jobId: string; reported: boolean; inWindow: boolean; story: string }>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function faultText(f: ProcessFault): string {
  switch (f.kind) {
    case 'kill-every':
      return `kill -9 a receiver every ${f.everyMs / 1000} s (in turn), restarted at once`;
    case 'sigstop':
      return `SIGSTOP a receiver while a handler runs, SIGCONT after ${f.ms / 1000} s`;
    case 'blackhole':
      return `one receiver's store link black-holed ${f.ms / 1000} s (TCP proxy stops forwarding, nothing closed)`;
    case 'store-pause':
      return `store SIGSTOP ${f.ms / 1000} s, then SIGCONT`;
    case 'store-crash':
      return `store killed (Redis SIGKILL / PostgreSQL stop -m immediate), started again after ${f.ms / 1000} s`;
    case 'tx-cut':
      return `receiver 0's ${f.fault === 'blackhole-all' ? 'every connection' : 'transaction connection'} ${f.fault === 'reset' ? 'reset' : `black-holed ${f.ms / 1000} s (the server keeps the sessions)`} ${f.at === 'complete' ? 'as its completion statement is sent' : "mid-handler, once the handler's row was written"}, ${f.times} times within ${f.ms / 1000} s (inbox pattern)`;
    case 'self-kill':
      return `each receiver SIGKILLed ${f.at === 'handler' ? 'mid-handler (its effect written)' : f.at === 'complete' ? 'between its handler and the completion' : "during the completion's commit (a thread sends SIGKILL 0–3 ms into the write transaction)"} 2–5 s after it began to listen, restarted at once`;
    case 'skew':
      return `receiver 1's clock ${f.skewS} s behind (maxFutureSkewSeconds ${f.skewS}), window ${f.windowS} s, retention ${f.windowS} s; every delivery replayed to receivers 0 and 1 at 1.5 s either side of the window's end on each clock`;
  }
}

async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** The store of the suite process (pending records, the reconciler), on the case's server. */
function parentStore(def: ProcessCaseDef, url: string): IdempotencyStore & { close(): Promise<void> } {
  if (def.store === 'sqlite')
    return new SqliteIdempotencyStore({ path: url, table: STORE_TABLE, transactional: def.transactional });
  return def.store === 'redis'
    ? new RedisIdempotencyStore({ url, keyPrefix: REDIS_KEY_PREFIX, log: {} })
    : new PostgresIdempotencyStore({
        connectionString: url,
        table: STORE_TABLE,
        transactional: def.transactional,
      });
}

export async function runProcessCase(
  def: ProcessCaseDef,
  suiteCorpus: Corpus,
  config: ProcessRunConfig,
  client: Pick<GatewayClient, 'getJob'>,
  script: string,
): Promise<ProcessCaseResult> {
  // The skew case's events are signed now (they must be fresh when its window is counted).
  const builtAt = Date.now();
  const corpus = def.freshCorpus?.() ?? suiteCorpus;
  const dir = mkdtempSync(join(tmpdir(), `jobhook-faults18-${def.id}-`));
  const server: FaultableServer =
    def.store === 'sqlite'
      ? sqliteFile(dir)
      : def.store === 'redis'
        ? await startRedis({ appendOnly: true })
        : await startPostgres({ maxConnections: 300 });
  const store = parentStore(def, server.url);
  let proxy: BlackholeProxy | undefined;
  let pgProxy: PgProxy | undefined;
  const slots: ReceiverSlot[] = [];
  const windows: FaultWindow[] = [];
  let faultRun: Promise<void> | undefined;
  let loadDone = false;
  /** self-kill: the loop restarting the receivers, and when it stops. */
  let restarts: Promise<void> | undefined;
  let caseOver = false;
  const pg =
    def.store === 'postgres'
      ? new (await import('pg')).default.Pool({ connectionString: server.url, max: 2 })
      : undefined;
  pg?.on('error', () => undefined);
  const sqlite = def.store === 'sqlite' ? sqliteEffects(server.url) : undefined;
  try {
    if (store instanceof PostgresIdempotencyStore || store instanceof SqliteIdempotencyStore)
      await store.migrate();
    await pg?.query(
      `CREATE TABLE ${EFFECTS_TABLE} (id bigserial PRIMARY KEY, job_id text NOT NULL, pid integer NOT NULL, fence bigint NOT NULL)`,
    );
    await pg?.query(`CREATE TABLE ${INBOX_TABLE} (job_id text PRIMARY KEY)`);
    // What createGatewayClient({ store }).createJob does for each job it creates: record it as pending.
    await pool(corpus.jobIds, 16, (jobId) => store.trackPending!(jobId, { since: Date.now() - 1000 }));

    if (def.fault.kind === 'blackhole') proxy = await startProxy(server.url);
    if (def.fault.kind === 'tx-cut') pgProxy = await startPgProxy(server.url);
    const storeUrls = Array.from({ length: config.receivers }, (_, i) =>
      i === 0 ? (proxy?.url ?? pgProxy?.url ?? server.url) : server.url,
    );
    const env = {
      script,
      publicKey: publicPem(2048),
      store: def.store,
      storeUrls,
      transactional: def.transactional,
      dir,
      ...receiverEnv(def.fault),
    };
    for (let i = 0; i < config.receivers; i++) {
      const port = await freePort();
      slots.push({
        index: i,
        port,
        url: `http://127.0.0.1:${port}/webhooks/gateway`,
        child: undefined,
        logFiles: [],
        running: new Set(),
        incarnations: 0,
        stderr: [],
      });
    }
    await Promise.all(slots.map((s) => startSlot(s, env)));

    const fault = def.fault;
    const oneOff = async (): Promise<void> => {
      const from = Date.now();
      if (fault.kind === 'sigstop') {
        // Mid-handler: wait (up to 3 s) until the receiver says a handler of its own is running.
        const slot = slots[1]!;
        const t = Date.now();
        while (slot.running.size === 0 && Date.now() - t < 3000) await sleep(2);
        const at = Date.now();
        signalSlot(slot, 'SIGSTOP');
        await sleep(fault.ms);
        signalSlot(slot, 'SIGCONT');
        windows.push({
          what: `receiver 1 stopped (${slot.running.size} handler(s) running)`,
          slot: 1,
          from: at,
          to: Date.now(),
        });
      } else if (fault.kind === 'blackhole') {
        proxy!.blackhole();
        await sleep(fault.ms);
        proxy!.heal();
        windows.push({ what: 'receiver 0 cut off from the store', slot: 0, from, to: Date.now() });
      } else if (fault.kind === 'store-pause') {
        await server.pause();
        await sleep(fault.ms);
        await server.resume();
        windows.push({ what: 'store paused', from, to: Date.now() });
      } else if (fault.kind === 'tx-cut') {
        windows.push(await cutTransactions(pgProxy!, fault));
      } else if (fault.kind === 'store-crash') {
        await server.kill();
        await sleep(fault.ms);
        await server.start();
        windows.push({ what: 'store down', from, to: Date.now() });
      }
    };
    /** Restarts each receiver that killed itself (self-kill), until the case is over (the gateway's retries too). */
    const restartLoop = async (): Promise<void> => {
      while (!caseOver) {
        for (const slot of slots) {
          const child = slot.child;
          if (child === undefined || (child.exitCode === null && child.signalCode === null)) continue;
          const from = Date.now();
          // A start that failed (its process died before it listened) is tried again on the next turn.
          await startSlot(slot, env).catch(() => undefined);
          windows.push({
            what: `receiver ${slot.index} killed itself`,
            slot: slot.index,
            from,
            to: Date.now(),
          });
        }
        await sleep(20);
      }
    };
    const killLoop = async (everyMs: number): Promise<void> => {
      let k = 0;
      await sleep(everyMs / 2);
      while (!loadDone) {
        const slot = slots[k++ % slots.length]!;
        const from = Date.now();
        await killSlot(slot);
        await startSlot(slot, env);
        windows.push({ what: `receiver ${slot.index} killed`, slot: slot.index, from, to: Date.now() });
        const wait = everyMs - (Date.now() - from);
        const t = Date.now();
        while (!loadDone && Date.now() - t < wait) await sleep(50);
      }
    };

    const attemptsBySeq = new Map<number, AttemptRecord[]>();
    const answers = new Map<string, number>();
    const counts = { attempts: 0, a2: 0, a4: 0, a5: 0, none: 0, gaveUp: 0 };
    const faultAfter = Math.max(1, Math.floor(corpus.deliveries.length * config.faultAt));
    const t0 = Date.now();
    if (fault.kind === 'kill-every') faultRun = killLoop(fault.everyMs);
    if (fault.kind === 'self-kill') restarts = restartLoop();
    await sendAll({
      deliveries: corpus.deliveries,
      urls: slots.map((s) => s.url),
      concurrency: config.concurrency,
      ratePerSecond: config.ratePerSecond,
      policy: config.policy,
      onDispatch: (count) => {
        if (count === faultAfter && fault.kind !== 'kill-every' && fault.kind !== 'self-kill')
          faultRun = oneOff();
        if (count === corpus.deliveries.length) loadDone = true;
      },
      onAttempt,
    });
    function onAttempt(r: AttemptRecord): void {
      counts.attempts++;
      answers.set(r.label, (answers.get(r.label) ?? 0) + 1);
      const list = attemptsBySeq.get(r.delivery.seq);
      if (list === undefined) attemptsBySeq.set(r.delivery.seq, [r]);
      else list.push(r);
      if (r.status === undefined) counts.none++;
      else if (r.status >= 500) counts.a5++;
      else if (r.status >= 400) counts.a4++;
      else if (r.status >= 200 && r.status < 300) counts.a2++;
      if (r.outcome === 'gave-up') counts.gaveUp++;
    }
    loadDone = true;
    const sendSeconds = Math.round((Date.now() - t0) / 100) / 10;
    await faultRun;
    if (fault.kind === 'skew') {
      const from = Date.now();
      await replayAroundWindowEnds(fault, corpus, builtAt, (deliveries) =>
        sendAll({
          deliveries,
          urls: slots.map((s) => s.url),
          concurrency: config.concurrency,
          policy: config.policy,
          onAttempt,
        }),
      );
      windows.push({ what: 'replays near the window ends', from, to: Date.now() });
    }

    // The gateway is done. Let the receivers finish what they hold (handlers, completions in their repair queues).
    const g0 = Date.now();
    while (Date.now() - g0 < 30_000 && slots.some((s) => s.running.size > 0)) await sleep(50);
    await sleep(config.leaseMs);

    const receiverFiles = () => slots.flatMap((s) => s.logFiles);
    const effectJobs = (lines: EffectLine[]) => new Set(lines.map((e) => e.jobId));
    const beforeReconciler = sqlite?.transactional(def.transactional)
      ? new Set(sqlite.rows().map((r) => r.job_id))
      : def.transactional
        ? new Set(
            (await pg!.query<{ job_id: string }>(`SELECT DISTINCT job_id FROM ${EFFECTS_TABLE}`)).rows.map(
              (r) => r.job_id,
            ),
          )
        : effectJobs(readLogs(receiverFiles()).effects);
    const lostBeforeReconciler = corpus.jobIds.filter((id) => !beforeReconciler.has(id)).length;

    // The reconciler, in this process, on the same store: polls the jobs still pending at the gateway simulator.
    const reconcilerLog = join(dir, 'reconciler.log');
    const fh = await open(reconcilerLog, 'a');
    const write = async (line: string) => {
      await fh.appendFile(`${line}\n`);
      await fh.datasync();
    };
    const reconciler = createReconciler<import('pg').PoolClient>({
      client,
      store,
      graceMs: 0,
      batchSize: 1000,
      concurrency: 8,
      log: {},
      onError: (error, { jobId, stage }) => {
        const e = error as { code?: string; message?: string };
        void write(
          `R ${Date.now()} ${jobId ?? '-'} ${stage} ${e?.code ?? 'error'} ${(e?.message ?? String(error)).replace(/\s+/g, ' ')}`,
        );
      },
      onEvent: async (_event, ctx) => {
        if (def.transactional && sqlite !== undefined)
          (ctx.transaction as unknown as { run(sql: string, ...p: unknown[]): unknown }).run(
            `INSERT INTO ${EFFECTS_TABLE} (job_id, pid, fence) VALUES (?, ?, ?)`,
            ctx.jobId,
            process.pid,
            ctx.fencingToken,
          );
        else if (def.transactional)
          await ctx.transaction!.query(
            `INSERT INTO ${EFFECTS_TABLE} (job_id, pid, fence) VALUES ($1, $2, $3)`,
            [ctx.jobId, process.pid, ctx.fencingToken],
          );
        await write(`E ${Date.now()} ${ctx.jobId} ${process.pid} ${ctx.fencingToken}`);
      },
    });
    let reconcilerProcessed = 0;
    let rounds = 0;
    const r0 = Date.now();
    while (Date.now() - r0 < 120_000) {
      const left = await store.listPending!({ before: Date.now(), limit: 1 }).catch(() => [1]);
      if (left.length === 0) break;
      const report = await reconciler.runOnce();
      rounds++;
      reconcilerProcessed += report.processed;
      if (report.checked === 0 || report.pending + report.failed > 0) await sleep(500);
    }
    await reconciler.stop();
    await sleep(200);
    await fh.close();

    // Count.
    const logs = readLogs([...receiverFiles(), reconcilerLog]);
    const handlerEffects = logs.effects.length;
    let effects: Array<{ jobId: string; at: number; pid: number; fence: number; file: string }> =
      logs.effects;
    if (def.transactional) {
      const rows =
        sqlite !== undefined
          ? sqlite.rows()
          : (
              await pg!.query<{ job_id: string; pid: number; fence: string }>(
                `SELECT job_id, pid, fence FROM ${EFFECTS_TABLE} ORDER BY id`,
              )
            ).rows;
      // A row's time and file: the log line of the same job, pid and fence (written right after the insert).
      const lineOf = new Map(logs.effects.map((e) => [`${e.jobId} ${e.pid} ${e.fence}`, e]));
      effects = rows.map((r) => {
        const line = lineOf.get(`${r.job_id} ${r.pid} ${r.fence}`);
        return {
          jobId: r.job_id,
          pid: r.pid,
          fence: Number(r.fence),
          at: line?.at ?? NaN,
          file: line?.file ?? '(no log line)',
        };
      });
    }
    const byJob = new Map<string, typeof effects>();
    for (const e of effects) byJob.set(e.jobId, [...(byJob.get(e.jobId) ?? []), e]);
    const superseded = logs.reports.filter((r) => r.stage === 'superseded');
    const reportedJobs = new Set(superseded.map((r) => r.jobId));
    const reportsByStage = new Map<string, number>();
    for (const r of logs.reports) {
      const key = `${r.stage} ${r.code}: ${r.message.split(r.jobId).join('…').slice(0, 110)}`;
      reportsByStage.set(key, (reportsByStage.get(key) ?? 0) + 1);
    }
    const inWindow = (at: number) =>
      windows.some((w) => at >= w.from - config.leaseMs - 1000 && at <= w.to + 2000);
    const rel = (at: number) => `${((at - t0) / 1000).toFixed(2)} s`;
    const storyOf = (jobId: string): string => {
      const deliveries = corpus.deliveries.filter((d) => d.jobId === jobId);
      const sent = deliveries
        .map(
          (d) =>
            `→r${d.instance}: ${(attemptsBySeq.get(d.seq) ?? []).map((a) => a.label).join(', ') || 'never sent'} ⇒ ${attemptsBySeq.get(d.seq)?.at(-1)?.outcome ?? '-'}`,
        )
        .join(' | ');
      const eff = (byJob.get(jobId) ?? [])
        .map((e) => `effect ${rel(e.at)} pid ${e.pid} fence ${e.fence} (${e.file.split('/').pop()})`)
        .join('; ');
      const reps = logs.reports
        .filter((r) => r.jobId === jobId)
        .map((r) => `${r.stage} at ${rel(r.at)} (${r.file.split('/').pop()}): ${r.message.slice(0, 160)}`)
        .join('; ');
      return `${sent} || ${eff || 'no effect'}${reps ? ` || reports: ${reps}` : ''}`;
    };
    const lostIds = corpus.jobIds.filter((id) => !byJob.has(id));
    const doubledIds = corpus.jobIds.filter((id) => (byJob.get(id)?.length ?? 0) > 1);
    // Handler runs (their fsync'd lines): in transactional mode, effects outside the transaction.
    const runsByJob = new Map<string, number>();
    for (const e of logs.effects) runsByJob.set(e.jobId, (runsByJob.get(e.jobId) ?? 0) + 1);
    const outsideDoubled = corpus.jobIds.filter((id) => (runsByJob.get(id) ?? 0) > 1);
    const doubledJobs = doubledIds.map((jobId) => {
      const first = Math.min(...byJob.get(jobId)!.map((e) => e.at));
      return { jobId, reported: reportedJobs.has(jobId), inWindow: inWindow(first), story: storyOf(jobId) };
    });
    const receiverLog = new Map(logs.logLines);
    return {
      id: def.id,
      title: def.title,
      store:
        def.store === 'sqlite'
          ? `SQLite (WAL, synchronous = FULL), one file${def.transactional ? ', transactional: true' : ''}`
          : def.store === 'redis'
            ? 'Redis 7, appendonly yes, appendfsync everysec'
            : `PostgreSQL (fsync off)${def.transactional ? ', transactional: true' : ''}`,
      fault: faultText(def.fault),
      transactional: def.transactional,
      deliveries: corpus.deliveries.length,
      distinctJobs: corpus.jobIds.length,
      attempts: counts.attempts,
      answers2xx: counts.a2,
      answers4xx: counts.a4,
      answers5xx: counts.a5,
      noAnswer: counts.none,
      gaveUp: counts.gaveUp,
      answers: Object.fromEntries([...answers.entries()].sort((a, b) => b[1] - a[1])),
      lostBeforeReconciler,
      reconcilerProcessed,
      reconcilerRounds: rounds,
      lost: lostIds.length,
      runTwice: doubledIds.length,
      reportedDoubles: doubledJobs.filter((d) => d.reported).length,
      silentDoubles: doubledJobs.filter((d) => !d.reported).length,
      outsideDoubles: outsideDoubled.length,
      silentOutsideDoubles: outsideDoubled.filter((id) => !reportedJobs.has(id)).length,
      doublesOutsideWindow: doubledJobs.filter((d) => !d.inWindow).length,
      supersededReports: superseded.length,
      supersededJobs: reportedJobs.size,
      handlerEffects,
      effects: effects.length,
      receiverRestarts: slots.reduce((n, s) => n + s.incarnations - 1, 0),
      windows: windows.map((w) => ({
        what: w.what,
        ...(w.slot === undefined ? {} : { slot: w.slot }),
        fromS: (w.from - t0) / 1000,
        toS: (w.to - t0) / 1000,
      })),
      receiverLog: Object.fromEntries([...receiverLog.entries()].sort((a, b) => b[1] - a[1])),
      reportsByStage: Object.fromEntries([...reportsByStage.entries()].sort((a, b) => b[1] - a[1])),
      sendSeconds,
      lostJobs: lostIds.slice(0, 20).map((jobId) => ({ jobId, story: storyOf(jobId) })),
      doubledJobs: [
        ...doubledJobs.slice(0, 40),
        // Transactional: a handler run twice outside its transaction and not reported (a silent double of an outside effect).
        ...(def.transactional
          ? outsideDoubled
              .filter((id) => !reportedJobs.has(id))
              .slice(0, 20)
              .map((jobId) => ({
                jobId,
                reported: false,
                inWindow: inWindow(
                  Math.min(...logs.effects.filter((e) => e.jobId === jobId).map((e) => e.at)),
                ),
                story: `handler ran ${runsByJob.get(jobId)} times: ${storyOf(jobId)}`,
              }))
          : []),
      ],
    };
  } finally {
    loadDone = true;
    caseOver = true;
    await faultRun?.catch(() => undefined);
    await restarts?.catch(() => undefined);
    proxy?.heal();
    pgProxy?.heal();
    for (const s of slots) {
      try {
        if (s.child?.pid !== undefined) process.kill(s.child.pid, 'SIGCONT');
      } catch {
        // gone
      }
      await killSlot(s);
    }
    await proxy?.close();
    await pgProxy?.close();
    await store.close();
    await pg?.end().catch(() => undefined);
    sqlite?.close();
    await server.destroy();
    if (process.env.JOBHOOK_FAULTS_KEEP_LOGS === undefined) await rm(dir, { recursive: true, force: true });
  }
}

/** The receivers' environment for a fault: the inbox pattern for a cut transaction; the window, the skew and receiver 1's clock for the skew case. */
function receiverEnv(f: ProcessFault): {
  extra?: Record<string, string>;
  perSlot?: Array<Record<string, string>>;
} {
  if (f.kind === 'tx-cut') return { extra: { INBOX: '1' } };
  if (f.kind === 'self-kill') return { extra: { KILL_AT: f.at } };
  if (f.kind !== 'skew') return {};
  return {
    extra: { MAX_AGE_S: String(f.windowS), MAX_SKEW_S: String(f.skewS), RETAIN_MS: String(f.windowS * 1000) },
    perSlot: [{}, { CLOCK_SKEW_MS: String(-f.skewS * 1000) }],
  };
}

/** The statement that writes a transactional completion (not the plain completion's upsert). */
const COMPLETION = /UPDATE \S+ SET state = 'completed'/;
const HANDLER_ROW = new RegExp(`INSERT INTO ${EFFECTS_TABLE} `);

/** Arms the proxy `times` times, waits `ms`, heals what was black-holed; the fault's window. */
async function cutTransactions(
  proxy: PgProxy,
  f: Extract<ProcessFault, { kind: 'tx-cut' }>,
): Promise<FaultWindow> {
  const from = Date.now();
  let hits = 0;
  const fired = proxy
    .arm({
      match: f.at === 'complete' ? COMPLETION : HANDLER_ROW,
      when: f.at === 'complete' ? 'before' : 'after',
      fault: f.fault,
      times: f.times,
    })
    .then(() => (hits = f.times));
  await Promise.race([fired, sleep(f.ms)]);
  await sleep(Math.max(0, from + f.ms - Date.now()));
  proxy.heal();
  return {
    what: `receiver 0's ${f.fault === 'blackhole-all' ? 'store link' : 'transactions'} ${f.fault === 'reset' ? 'reset' : 'black-holed'} at ${f.at === 'complete' ? 'the completion' : "the handler's row"} (${hits === f.times ? f.times : `fewer than ${f.times}`} times)`,
    slot: 0,
    from,
    to: Date.now(),
  };
}

/**
 * Sends every job's first delivery again to receivers 0 (clock right) and 1 (clock
 * `skewS` behind) at 1.5 s before and after the end of the window on each clock, counted
 * from `signedAt` (when the events were signed: their finished_at).
 */
async function replayAroundWindowEnds(
  f: Extract<ProcessFault, { kind: 'skew' }>,
  corpus: Corpus,
  signedAt: number,
  send: (deliveries: Corpus['deliveries']) => Promise<void>,
): Promise<void> {
  const windowMs = f.windowS * 1000;
  const skewMs = f.skewS * 1000;
  const firsts = [...new Map(corpus.deliveries.map((d) => [d.jobId, d] as const)).values()];
  let seq = corpus.deliveries.length;
  for (const age of [windowMs - 1500, windowMs + 1500, windowMs + skewMs - 1500, windowMs + skewMs + 1500]) {
    await sleep(Math.max(0, signedAt + age - Date.now()));
    await send(
      firsts.flatMap((d) =>
        [0, 1].map((instance) => ({ ...d, seq: seq++, instance, kind: 'duplicate-later' as const })),
      ),
    );
  }
}
