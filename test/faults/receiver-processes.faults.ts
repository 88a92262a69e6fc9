/**
 * Issue 18, item 7: receiver faults. Three receivers, each a process of its own
 * (harness/receiver-process.ts, bundled once with esbuild), share one store (Redis with AOF, or
 * PostgreSQL, plain or `transactional: true`); the gateway-like sender (3 retries,
 * backoff 1 s doubling, 30 s per attempt) offers the jobs at a fixed rate, 20 % of them
 * sent twice at once to two different receivers; each handler records its effect in an
 * fsync'd log (one file per process) and, in transactional mode, writes a row through
 * `context.transaction`. Faults: kill -9 a receiver every 10 s and restart it; SIGSTOP a
 * receiver 10 s while a handler runs; one receiver's store link black-holed 10 s through
 * a TCP proxy while the others keep the store; the store paused and restarted. After the
 * load, the reconciler polls the jobs still pending at the gateway simulator.
 *
 * Issue 27 adds: receiver 0's store link through the statement-aware proxy
 * (test/helpers/pg-proxy.ts), which resets or black-holes its handlers' transaction
 * connections as the completion statement is sent, or mid-handler once the handler's row
 * is written (the handlers then use the README's inbox pattern: a key per job, ON
 * CONFLICT DO NOTHING, which a cut-off transaction holds); and receivers whose clocks
 * differ by the skew tolerated (maxFutureSkewSeconds), every delivery replayed to both
 * near the end of the replay window on each clock.
 *
 *   npm run test:faults -- receiver-processes          # full: 10,000 jobs per case (the skew cases 1,000) at 200 jobs/s
 *   JOBHOOK_FAULTS=short npm run test:faults           # CI: 400 jobs per case (the skew case 200), 9 cases, two at a time
 *   JOBHOOK_FAULTS_JOBS=2000 …                          # another count (not for the recorded figures)
 *   JOBHOOK_FAULTS_KEEP_LOGS=1 …                        # keep the receivers' logs (in the OS temp dir)
 *
 * Asserted (README, "What once means"): transactional mode, 0 jobs lost and 0 run twice
 * (rows of the effects table), and every handler run twice (its log line: an effect
 * outside the transaction) reported; other modes, 0 lost after the reconciler, every job run
 * twice reported (onError stage `superseded` naming it: 0 silent doubles), and no double
 * whose first effect lies outside a fault's window (the fault, widened by a lease before
 * and 2 s after). Results: .tmp/faults18-results.json and .md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createGatewayClient, type GatewayClient } from '../../src/gateway.js';
import { startGatewaySimulator, type GatewaySimulator } from '../../src/testing.js';
import { privatePem } from '../helpers/keys.js';
import { ROOT } from '../helpers/paths.js';
import { availability } from '../helpers/servers.js';
import { buildCorpus, distinctJobs, type Corpus } from './harness/corpus.js';
import { bundleReceiver } from './harness/processes.js';
import {
  runProcessCase,
  type ProcessCaseDef,
  type ProcessCaseResult,
  type ProcessRunConfig,
} from './harness/process-run.js';
import { machineAndGit } from './harness/report.js';
import { GATEWAY_POLICY } from './harness/sender.js';

const mode = process.env.JOBHOOK_FAULTS === 'short' ? 'short' : 'full';
const JOBS = Number(process.env.JOBHOOK_FAULTS_JOBS) || (mode === 'short' ? 400 : 10_000);
// 20 % of the jobs are sent twice at once: duplicates are a sixth of the deliveries.
const DUPLICATE_SHARE = 1 / 6;
const DELIVERIES = Math.round(JOBS * 1.2);

const config: ProcessRunConfig = {
  receivers: 3,
  concurrency: 64,
  ratePerSecond: mode === 'short' ? 30 : 200,
  policy: GATEWAY_POLICY,
  faultAt: 0.3,
  leaseMs: 5000,
  takeoverGraceMs: 2000,
};

const redis = availability('redis', 'fault tests');
const postgres = availability('postgres', 'fault tests');
for (const a of [redis, postgres]) if (a.skip) console.warn(`\n[jobhook] ${a.reason}\n`);

const modes = [
  { key: 'redis', label: 'Redis', store: 'redis', transactional: false },
  { key: 'postgres', label: 'PostgreSQL', store: 'postgres', transactional: false },
  { key: 'postgres-tx', label: 'PostgreSQL transactional', store: 'postgres', transactional: true },
] as const;
const faults = [
  {
    key: 'kill',
    label: 'a receiver killed (kill -9) every 10 s and restarted',
    fault: { kind: 'kill-every', everyMs: 10_000 },
  },
  {
    key: 'sigstop',
    label: 'a receiver paused 10 s mid-handler (SIGSTOP/SIGCONT)',
    fault: { kind: 'sigstop', ms: 10_000 },
  },
  {
    key: 'blackhole',
    label: "a receiver's store link black-holed 10 s",
    fault: { kind: 'blackhole', ms: 10_000 },
  },
  { key: 'store-pause', label: 'store paused 7 s (SIGSTOP)', fault: { kind: 'store-pause', ms: 7000 } },
  {
    key: 'store-crash',
    label: 'store killed, restarted after 3 s',
    fault: { kind: 'store-crash', ms: 3000 },
  },
] as const;
/** Issue 27: the transaction's connection cut (PostgreSQL transactional only). */
const txFaults = [
  {
    key: 'cut-complete-reset',
    label: "the transaction's connection reset at its completion statement (5 times)",
    fault: { kind: 'tx-cut', at: 'complete', fault: 'reset', times: 5, ms: 10_000 },
  },
  {
    key: 'cut-complete-blackhole',
    label: "the transaction's connection black-holed at its completion statement (3 times, 15 s)",
    fault: { kind: 'tx-cut', at: 'complete', fault: 'blackhole', times: 3, ms: 15_000 },
  },
  {
    key: 'cut-handler-reset',
    label: "the transaction's connection reset mid-handler, after its row (5 times)",
    fault: { kind: 'tx-cut', at: 'handler', fault: 'reset', times: 5, ms: 10_000 },
  },
  {
    key: 'cut-handler-blackhole',
    label: "the transaction's connection black-holed mid-handler, after its row (3 times, 15 s)",
    fault: { kind: 'tx-cut', at: 'handler', fault: 'blackhole', times: 3, ms: 15_000 },
  },
  {
    key: 'cut-handler-blackhole-all',
    label: 'every store connection of a receiver black-holed 30 s mid-handler, after its row',
    fault: { kind: 'tx-cut', at: 'handler', fault: 'blackhole-all', times: 1, ms: 30_000 },
  },
] as const;
/** Issue 27: receiver 1's clock behind by the skew tolerated; replays near the window's end on each clock. */
const SKEW = { kind: 'skew', skewS: 8, windowS: 20 } as const;
/** The skew case's load (fresh: signed when the case starts; sent within the window). */
const SKEW_DELIVERIES = mode === 'short' ? 240 : 1200;
const skewCorpus = (ids: () => string[]) => () =>
  buildCorpus({
    deliveries: SKEW_DELIVERIES,
    duplicateShare: DUPLICATE_SHARE,
    concurrentShare: 1,
    instances: config.receivers,
    seed: 27,
    jobIds: ids(),
  });
let jobIdsForSkew: string[] = [];

const cases: ProcessCaseDef[] = [
  ...modes.flatMap((m) =>
    faults.map((f) => ({
      id: `${m.key}-${f.key}`,
      title: `${m.label}: ${f.label}`,
      store: m.store,
      transactional: m.transactional,
      fault: f.fault,
    })),
  ),
  ...txFaults.map((f) => ({
    id: `postgres-tx-${f.key}`,
    title: `PostgreSQL transactional: ${f.label}`,
    store: 'postgres' as const,
    transactional: true,
    fault: f.fault,
  })),
  ...modes.map((m) => ({
    id: `${m.key}-skew`,
    title: `${m.label}: receivers' clocks ${SKEW.skewS} s apart (the skew tolerated), replays near the window's end`,
    store: m.store,
    transactional: m.transactional,
    fault: SKEW,
    freshCorpus: skewCorpus(() => jobIdsForSkew),
  })),
];
/** The short mode's subset: each receiver fault on Redis and on transactional PostgreSQL; a cut at the completion and mid-handler; the skew on transactional PostgreSQL. */
const SHORT = new Set([
  'redis-kill',
  'postgres-tx-kill',
  'redis-sigstop',
  'postgres-tx-sigstop',
  'redis-blackhole',
  'postgres-tx-blackhole',
  'postgres-tx-cut-complete-reset',
  'postgres-tx-cut-handler-blackhole-all',
  'postgres-tx-skew',
]);

function skip(c: ProcessCaseDef): boolean {
  if (mode === 'short' && !SHORT.has(c.id)) return true;
  return (c.store === 'postgres' ? postgres : redis).skip;
}

const cell = (x: number) => (x === 0 ? '0' : `**${x}**`);
function table(results: Array<ProcessCaseResult & { caseSeconds: number }>): string {
  const head =
    '| case | jobs | lost | run twice | reported / silent doubles | outside window | handler runs twice: reported / silent | lost before reconciler (recovered) | 2xx | 4xx | 5xx | no answer | gave up | restarts | send s | case s |\n' +
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  return [
    head,
    ...results.map(
      (r) =>
        `| ${r.title} | ${r.distinctJobs} | ${cell(r.lost)} | ${r.transactional ? cell(r.runTwice) : r.runTwice} | ${r.reportedDoubles} / ${cell(r.silentDoubles)} | ${cell(r.doublesOutsideWindow)} | ${r.outsideDoubles - r.silentOutsideDoubles} / ${cell(r.silentOutsideDoubles)} | ${r.lostBeforeReconciler} (${r.reconcilerProcessed}) | ${r.answers2xx} | ${r.answers4xx} | ${r.answers5xx} | ${r.noAnswer} | ${r.gaveUp} | ${r.receiverRestarts} | ${r.sendSeconds} | ${r.caseSeconds} |`,
    ),
  ].join('\n');
}
function details(results: ProcessCaseResult[]): string {
  const out: string[] = [];
  for (const r of results) {
    out.push(`#### ${r.title}`);
    out.push(
      `- store: ${r.store}; fault: ${r.fault}; windows: ${r.windows.map((w) => `${w.what} ${w.fromS}–${w.toS} s`).join(', ') || 'none'}`,
    );
    out.push(
      `- effects ${r.effects}${r.transactional ? ` rows (handler runs that wrote one: ${r.handlerEffects})` : ''}; superseded reports ${r.supersededReports} naming ${r.supersededJobs} jobs; reconciler rounds ${r.reconcilerRounds}`,
    );
    out.push(
      `- answers: ${Object.entries(r.answers)
        .map(([k, v]) => `${k} ×${v}`)
        .join(', ')}`,
    );
    out.push(
      `- onError: ${
        Object.entries(r.reportsByStage)
          .map(([k, v]) => `${k} ×${v}`)
          .join(', ') || 'none'
      }`,
    );
    out.push(
      `- receiver log: ${
        Object.entries(r.receiverLog)
          .slice(0, 8)
          .map(([k, v]) => `${k} ×${v}`)
          .join(', ') || 'none'
      }`,
    );
    for (const j of r.lostJobs) out.push(`- lost ${j.jobId}: ${j.story}`);
    for (const j of r.doubledJobs.filter((d) => !d.reported || !d.inWindow || r.transactional))
      out.push(
        `- run twice ${j.jobId} (${j.reported ? 'reported' : 'SILENT'}, ${j.inWindow ? 'in a fault window' : 'OUTSIDE every fault window'}): ${j.story}`,
      );
  }
  return out.join('\n');
}

describe(`receiver faults (issue 18; ${mode}: ${JOBS} jobs per case at ${config.ratePerSecond} jobs/s, ${config.receivers} receiver processes sharing one store)`, () => {
  let corpus!: Corpus;
  let sim!: GatewaySimulator;
  let client!: GatewayClient;
  let bundle: Awaited<ReturnType<typeof bundleReceiver>> | undefined;
  const results: Array<ProcessCaseResult & { caseSeconds: number }> = [];
  const meta = {
    mode,
    startedAt: new Date().toISOString(),
    jobs: JOBS,
    deliveries: DELIVERIES,
    config,
    ...machineAndGit(),
  };

  beforeAll(async () => {
    bundle = await bundleReceiver();
    // The gateway: jobs created at the simulator (finished at once, no webhook of its own), read back by the reconciler.
    sim = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 0 });
    client = createGatewayClient({ baseUrl: sim.url, token: sim.token });
    const ids: string[] = [];
    const need = distinctJobs({ deliveries: DELIVERIES, duplicateShare: DUPLICATE_SHARE });
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < need) {
          next++;
          ids.push((await client.createJob({ model: 'ocr/ocr_async/amazon', input: {} })).public_id);
        }
      }),
    );
    corpus = buildCorpus({
      deliveries: DELIVERIES,
      duplicateShare: DUPLICATE_SHARE,
      concurrentShare: 1,
      instances: config.receivers,
      seed: 18,
      jobIds: ids,
    });
    jobIdsForSkew = ids;
  }, 300_000);

  afterAll(async () => {
    await sim?.close();
    bundle?.remove();
    if (results.length === 0) return;
    const dir = join(ROOT, '.tmp');
    mkdirSync(dir, { recursive: true });
    const md = `${table(results)}\n\n${details(results)}\n`;
    writeFileSync(
      join(dir, 'faults18-results.json'),
      `${JSON.stringify({ meta: { ...meta, finishedAt: new Date().toISOString() }, results }, null, 2)}\n`,
    );
    writeFileSync(join(dir, 'faults18-results.md'), md);
    console.log(
      `\n## Receiver faults (${mode}), ${meta.machine.cpu} × ${meta.machine.cores}, Node ${meta.machine.node}, ${meta.git.commit}\n\n${md}\n(written to .tmp/faults18-results.json)\n`,
    );
  });

  for (const c of cases) {
    it(c.title, { skip: skip(c), concurrent: mode === 'short', timeout: 900_000 }, async ({ expect }) => {
      const started = Date.now();
      const r = {
        ...(await runProcessCase(c, corpus, config, client, bundle!.file)),
        caseSeconds: Math.round((Date.now() - started) / 1000),
      };
      results.push(r);
      results.sort((a, b) => cases.findIndex((x) => x.id === a.id) - cases.findIndex((x) => x.id === b.id));
      const why = `${r.title}: ${JSON.stringify({ lost: r.lostJobs.slice(0, 3), doubled: r.doubledJobs.filter((d) => !d.reported || !d.inWindow || c.transactional).slice(0, 3) })}`;
      if (c.transactional) {
        expect(
          { lost: r.lost, runTwice: r.runTwice, silentOutsideDoubles: r.silentOutsideDoubles },
          why,
        ).toEqual({ lost: 0, runTwice: 0, silentOutsideDoubles: 0 });
      } else {
        expect(
          { lost: r.lost, silentDoubles: r.silentDoubles, doublesOutsideWindow: r.doublesOutsideWindow },
          why,
        ).toEqual({ lost: 0, silentDoubles: 0, doublesOutsideWindow: 0 });
      }
    });
  }
});
