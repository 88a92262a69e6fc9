/**
 * One fault run: start the store and two receivers, send the load, inject the fault
 * part-way, wait for the receivers to go quiet, then count from the handler's records
 * and the sender's answers. Nothing corrects the outcome after the load.
 */
import { publicPem } from '../../helpers/keys.js';
import { startBackend, STORE_LABEL, type Fault, type FaultTimeline, type StoreKind } from './backends.js';
import type { Corpus } from './corpus.js';
import { createFaultReceiver, HandlerRecords, startInstances } from './receiver.js';
import { sendAll, type AttemptRecord, type GatewayPolicy } from './sender.js';

export interface CaseDef {
  /** Short id, also the key in the JSON results. */
  id: string;
  title: string;
  store: StoreKind;
  fault?: Fault;
  /** `leaseMs` given to the receivers (default: theirs: 60 s before the issue 10 fix, 5 s with renewal after). */
  leaseMs?: number;
  /** Jobs whose handler is slow: `count` of the jobs that also have a concurrent duplicate, `ms` each run. */
  slow?: { count: number; ms: number };
  /** false: a documented limitation, measured but not a pass/fail case. */
  asserted: boolean;
}

export interface RunConfig {
  concurrency: number;
  instances: number;
  policy: GatewayPolicy;
  /** Share of the deliveries started before the fault is injected. */
  faultAt: number;
  /** Longest wait for the receivers to go quiet once the sender is done (the gateway's own attempt timeout). */
  graceMaxMs: number;
}

export interface CaseResult {
  id: string;
  title: string;
  store: string;
  fault: string;
  leaseMs: number | 'receiver default';
  slowJobs: string;
  asserted: boolean;
  deliveries: number;
  distinctJobs: number;
  attempts: number;
  /** Jobs whose deliveries all ended without any completed handler run. */
  neverProcessed: number;
  /** Jobs with more than one completed run. */
  runTwice: number;
  /** Completed runs beyond the first, over all jobs. */
  extraRuns: number;
  /** 2xx answers for a job that had no completed run when the answer arrived. */
  twoxxUnprocessed: number;
  delivered: number;
  rejected: number;
  gaveUp: number;
  answers2xx: number;
  answers4xx: number;
  answers5xx: number;
  /** Attempts without an HTTP answer (connection error, timeout). */
  noAnswer: number;
  /** Attempts by answer: `200 processed`, `503 IN_PROGRESS`… */
  answers: Record<string, number>;
  /** What the receivers reported through onError (by stage, code and message) and their log (warn, error). */
  receiverErrors: Record<string, number>;
  handlerRuns: number;
  /** Deliveries per second, first attempt to the end of the last delivery. */
  throughput: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyMaxMs: number;
  sendSeconds: number;
  graceMs: number;
  /** Handler runs or receiver requests still unfinished when counting (grace exhausted). */
  unfinishedAtCount: number;
  faultTimeline: FaultTimeline | undefined;
  /** What the lost and the doubled jobs saw, most common first. */
  neverProcessedPatterns: Array<{ pattern: string; jobs: number }>;
  runTwicePatterns: Array<{ pattern: string; jobs: number }>;
  /** Jobs that were processed, yet one of their deliveries ended with the sender giving up. */
  gaveUpProcessedPatterns: Array<{ pattern: string; jobs: number }>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

/** `503 STORE_UNAVAILABLE → 503 IN_PROGRESS ×3 → gave-up`, consecutive repeats folded. */
function deliveryStory(records: AttemptRecord[]): string {
  const parts: string[] = [];
  let last = '';
  let n = 0;
  const flush = () => {
    if (n > 0) parts.push(n > 1 ? `${last} ×${n}` : last);
  };
  for (const r of records) {
    if (r.label === last) n++;
    else {
      flush();
      last = r.label;
      n = 1;
    }
  }
  flush();
  const end = records.at(-1)?.outcome ?? 'never sent';
  return `${parts.join(' → ')} ⇒ ${end}`;
}

function topPatterns(stories: string[], limit = 6): Array<{ pattern: string; jobs: number }> {
  const counts = new Map<string, number>();
  for (const s of stories) counts.set(s, (counts.get(s) ?? 0) + 1);
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, limit)
    .map(([pattern, jobs]) => ({ pattern, jobs }));
}

export async function runCase(def: CaseDef, corpus: Corpus, config: RunConfig): Promise<CaseResult> {
  const slowJobs = new Set<string>();
  if (def.slow !== undefined) {
    const pool = corpus.concurrentDuplicateJobs;
    const step = Math.max(1, Math.floor(pool.length / def.slow.count));
    for (let i = 0; i < pool.length && slowJobs.size < def.slow.count; i += step) slowJobs.add(pool[i]!);
  }
  const workMs = (jobId: string) => (slowJobs.has(jobId) ? def.slow!.ms : (corpus.workMs.get(jobId) ?? 10));
  const records = new HandlerRecords(workMs, sleep);
  const backend = await startBackend(def.store, config.instances);
  const publicKey = publicPem(2048);
  const receivers = backend.stores.map((store) =>
    createFaultReceiver({
      publicKey,
      store,
      onEvent: records.onEvent,
      onError: records.onError,
      log: records.log,
      ...(def.leaseMs !== undefined ? { leaseMs: def.leaseMs } : {}),
    }),
  );
  const instances = await startInstances(receivers.map((r) => r.handler));

  const attemptsByDelivery = new Map<number, AttemptRecord[]>();
  const answers = new Map<string, number>();
  const latencies: number[] = [];
  let twoxxUnprocessed = 0;
  const counts = { delivered: 0, rejected: 0, gaveUp: 0, a2: 0, a4: 0, a5: 0, none: 0 };

  const t0 = performance.now();
  const at = () => Math.round((performance.now() - t0) / 100) / 10;
  let faultRun: Promise<FaultTimeline> | undefined;
  const faultAfter = Math.max(1, Math.floor(corpus.deliveries.length * config.faultAt));
  try {
    await sendAll({
      deliveries: corpus.deliveries,
      urls: instances.urls,
      concurrency: config.concurrency,
      policy: config.policy,
      onDispatch: (count) => {
        if (count === faultAfter && def.fault !== undefined && backend.server !== undefined)
          faultRun = def.fault.inject(backend.server, at);
      },
      onAttempt: (r) => {
        // Checked the moment the answer arrives: has any run of this job completed?
        if (
          r.status !== undefined &&
          r.status >= 200 &&
          r.status < 300 &&
          !records.runs.has(r.delivery.jobId)
        )
          twoxxUnprocessed++;
        latencies.push(r.latencyMs);
        answers.set(r.label, (answers.get(r.label) ?? 0) + 1);
        const list = attemptsByDelivery.get(r.delivery.seq);
        if (list === undefined) attemptsByDelivery.set(r.delivery.seq, [r]);
        else list.push(r);
        if (r.status === undefined) counts.none++;
        else if (r.status >= 500) counts.a5++;
        else if (r.status >= 400) counts.a4++;
        else if (r.status >= 200 && r.status < 300) counts.a2++;
        if (r.outcome === 'delivered') counts.delivered++;
        else if (r.outcome === 'rejected') counts.rejected++;
        else if (r.outcome === 'gave-up') counts.gaveUp++;
      },
    });
    const sendSeconds = (performance.now() - t0) / 1000;
    const faultTimeline = faultRun === undefined ? undefined : await faultRun;
    if (def.fault !== undefined && faultTimeline === undefined)
      throw new Error(`${def.id}: the fault was never injected`);

    // Grace: the gateway is done (every delivery ended). Let the receivers finish what
    // they still hold (a handler whose client gave up, a store call that is timing out).
    const g0 = performance.now();
    while (performance.now() - g0 < config.graceMaxMs && (records.running > 0 || instances.unanswered() > 0))
      await sleep(20);
    const graceMs = Math.round(performance.now() - g0);
    const unfinishedAtCount = records.running + instances.unanswered();

    // Count.
    const byJob = new Map<string, AttemptRecord[][]>();
    for (const d of corpus.deliveries) {
      const list = byJob.get(d.jobId) ?? [];
      list.push(attemptsByDelivery.get(d.seq) ?? []);
      byJob.set(d.jobId, list);
    }
    const story = (jobId: string) => {
      const deliveries = byJob.get(jobId) ?? [];
      const errors = records.errorsByJob.get(jobId);
      return (
        deliveries.map(deliveryStory).join('  |  ') + (errors ? `  [receiver: ${errors.join(', ')}]` : '')
      );
    };
    const lost: string[] = [];
    const doubled: string[] = [];
    const gaveUpProcessed: string[] = [];
    let extraRuns = 0;
    for (const jobId of corpus.jobIds) {
      const runs = records.runs.get(jobId) ?? 0;
      if (runs === 0) lost.push(jobId);
      else if ((byJob.get(jobId) ?? []).some((attempts) => attempts.at(-1)?.outcome === 'gave-up'))
        gaveUpProcessed.push(jobId);
      if (runs > 1) {
        doubled.push(jobId);
        extraRuns += runs - 1;
      }
    }
    const sorted = Float64Array.from(latencies).sort();
    const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
    return {
      id: def.id,
      title: def.title,
      store: STORE_LABEL[def.store],
      fault: def.fault?.describe ?? 'none',
      leaseMs: def.leaseMs ?? 'receiver default',
      slowJobs:
        def.slow === undefined
          ? 'none'
          : `${slowJobs.size} jobs (each with a concurrent duplicate) take ${def.slow.ms} ms per run`,
      asserted: def.asserted,
      deliveries: corpus.deliveries.length,
      distinctJobs: corpus.jobIds.length,
      attempts: latencies.length,
      neverProcessed: lost.length,
      runTwice: doubled.length,
      extraRuns,
      twoxxUnprocessed,
      delivered: counts.delivered,
      rejected: counts.rejected,
      gaveUp: counts.gaveUp,
      answers2xx: counts.a2,
      answers4xx: counts.a4,
      answers5xx: counts.a5,
      noAnswer: counts.none,
      answers: Object.fromEntries([...answers.entries()].sort((a, b) => b[1] - a[1])),
      receiverErrors: Object.fromEntries([...records.receiverErrors.entries()].sort((a, b) => b[1] - a[1])),
      handlerRuns: records.completed.length,
      throughput: Math.round(corpus.deliveries.length / sendSeconds),
      latencyP50Ms: round(percentile(sorted, 0.5)),
      latencyP99Ms: round(percentile(sorted, 0.99)),
      latencyMaxMs: round(percentile(sorted, 1)),
      sendSeconds: round(sendSeconds),
      graceMs,
      unfinishedAtCount,
      faultTimeline,
      neverProcessedPatterns: topPatterns(lost.map(story)),
      runTwicePatterns: topPatterns(doubled.map(story)),
      gaveUpProcessedPatterns: topPatterns(gaveUpProcessed.map(story), 3),
    };
  } finally {
    // A fault still under way (the load failed early) must not outlive the run.
    await faultRun?.catch(() => undefined);
    await instances.close();
    await Promise.all(receivers.map((r) => r.close()));
    await backend.close();
  }
}
