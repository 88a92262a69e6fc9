/**
 * Issue 10: under load with faults injected, does the receiver lose jobs or run them
 * twice? Two receiver instances share one store; a gateway-like sender delivers every
 * job (with duplicates) under the gateway's retry policy while a fault hits the store.
 *
 *   npm run test:faults                          # full: 20,000 deliveries per case
 *   JOBHOOK_FAULTS=short npm run test:faults     # CI: 2,000 deliveries per case, two cases at a time
 *   npm run test:faults -- -t "Redis paused"     # one case
 *
 * The gateway's timings are kept in both modes (backoff 1, 2, 4 s; 30 s per attempt):
 * scaling them down without scaling the receiver's lease and store deadlines would
 * change which faults a receiver survives. Most of a faulted case is therefore waiting
 * (fault + the 7 s retry window), so the short mode runs two cases at a time, each on
 * its own servers (the vitest config allows 2 concurrent tests), and leaves out the
 * unasserted Redis-without-persistence measurement. Its throughput and latency figures
 * are not comparable with the full run's; its pass/fail figures are.
 *
 * Each asserted case expects 0 jobs never processed, 0 jobs run twice and 0 2xx answers
 * for a job not yet processed. The figures of every case are printed as a markdown table
 * and written to .tmp/faults-results.json (and .md).
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { availability } from '../helpers/servers.js';
import { crashFor, pauseFor } from './harness/backends.js';
import { buildCorpus, type Corpus } from './harness/corpus.js';
import {
  machineAndGit,
  markdownDetails,
  markdownTable,
  writeResults,
  type SuiteMeta,
} from './harness/report.js';
import { runCase, type CaseDef, type CaseResult, type RunConfig } from './harness/run.js';
import { GATEWAY_POLICY } from './harness/sender.js';

const mode = process.env.JOBHOOK_FAULTS === 'short' ? 'short' : 'full';
// JOBHOOK_FAULTS_DELIVERIES overrides the count (for trying a case quickly; not for the recorded figures).
const DELIVERIES = Number(process.env.JOBHOOK_FAULTS_DELIVERIES) || (mode === 'short' ? 2_000 : 20_000);
const DISTINCT = DELIVERIES - Math.round(DELIVERIES * 0.2);

const config: RunConfig = {
  concurrency: 64,
  instances: 2,
  // The gateway's own timings, not scaled down: backoff 1 s, 2 s, 4 s; 30 s per attempt.
  policy: GATEWAY_POLICY,
  faultAt: 0.3,
  graceMaxMs: GATEWAY_POLICY.timeoutMs,
};

// Under CI=true a missing binary throws here and fails the file, as in the store suites.
const redis = availability('redis', 'fault tests');
const postgres = availability('postgres', 'fault tests');
for (const a of [redis, postgres]) if (a.skip) console.warn(`\n[jobhook] ${a.reason}\n`);

const cases: CaseDef[] = [
  { id: 'none-memory', title: 'no fault, memory store', store: 'memory', asserted: true },
  { id: 'none-redis', title: 'no fault, Redis', store: 'redis', asserted: true },
  { id: 'none-postgres', title: 'no fault, PostgreSQL', store: 'postgres', asserted: true },
  {
    id: 'redis-pause-3s',
    title: 'Redis paused 3 s (SIGSTOP)',
    store: 'redis',
    fault: pauseFor(3000),
    asserted: true,
  },
  {
    id: 'redis-aof-kill-3s',
    title: 'Redis with AOF killed (SIGKILL), restarted after 3 s',
    store: 'redis',
    fault: crashFor(3000, 'SIGKILL'),
    asserted: true,
  },
  {
    id: 'postgres-pause-3s',
    title: 'PostgreSQL paused 3 s (SIGSTOP)',
    store: 'postgres',
    fault: pauseFor(3000),
    asserted: true,
  },
  {
    id: 'postgres-pause-7s',
    title: 'PostgreSQL paused 7 s (SIGSTOP, beyond its 5 s operation timeout)',
    store: 'postgres',
    fault: pauseFor(7000),
    asserted: true,
  },
  {
    id: 'postgres-immediate-3s',
    title: 'PostgreSQL stop -m immediate, restarted after 3 s',
    store: 'postgres',
    fault: crashFor(3000, 'pg_ctl stop -m immediate'),
    asserted: true,
  },
  {
    id: 'slow-handler-redis',
    title: 'handler slower than its lease (leaseMs 1,000, 2.5 s runs), Redis',
    store: 'redis',
    leaseMs: 1000,
    slow: { count: Math.round(DISTINCT / 100), ms: 2500 },
    asserted: true,
  },
  {
    id: 'redis-volatile-kill-3s',
    title: 'Redis without persistence killed, restarted after 3 s',
    store: 'redis-volatile',
    fault: crashFor(3000, 'SIGKILL'),
    asserted: false,
  },
];

function skip(c: CaseDef): boolean {
  if (mode === 'short' && !c.asserted) return true;
  if (c.store === 'memory') return false;
  return (c.store === 'postgres' ? postgres : redis).skip;
}

function summary(r: CaseResult): string {
  return (
    `${r.title}: never processed ${r.neverProcessed}, run twice ${r.runTwice}, 2xx unprocessed ${r.twoxxUnprocessed} ` +
    `(deliveries ${r.deliveries}, attempts ${r.attempts}, gave up ${r.gaveUp}; answers ${JSON.stringify(r.answers)}; ` +
    `receiver errors ${JSON.stringify(r.receiverErrors)}; lost: ${JSON.stringify(r.neverProcessedPatterns.slice(0, 2))}; doubled: ${JSON.stringify(r.runTwicePatterns.slice(0, 2))})`
  );
}

describe(`fault suite (${mode}: ${DELIVERIES} deliveries per case, concurrency ${config.concurrency}, ${config.instances} receivers sharing one store)`, () => {
  let corpus!: Corpus;
  const results: CaseResult[] = [];
  const meta: SuiteMeta = {
    mode,
    startedAt: new Date().toISOString(),
    deliveries: DELIVERIES,
    distinctJobs: DISTINCT,
    duplicatesConcurrent: 0,
    duplicatesLater: 0,
    seed: 10,
    config,
    ...machineAndGit(),
  };

  beforeAll(() => {
    corpus = buildCorpus({ deliveries: DELIVERIES, seed: meta.seed, instances: config.instances });
    meta.duplicatesConcurrent = corpus.deliveries.filter((d) => d.kind === 'duplicate-concurrent').length;
    meta.duplicatesLater = corpus.deliveries.filter((d) => d.kind === 'duplicate-later').length;
  }, 120_000);

  afterAll(() => {
    if (results.length === 0) return;
    meta.finishedAt = new Date().toISOString();
    const file = writeResults(meta, results);
    console.log(
      `\n## Fault suite (${mode}), ${meta.machine.cpu} × ${meta.machine.cores}, Node ${meta.machine.node}\n\n${markdownTable(results)}\n\n${markdownDetails(results)}\n\n(written to ${file})\n`,
    );
  });

  for (const c of cases) {
    it(c.title, { skip: skip(c), concurrent: mode === 'short', timeout: 600_000 }, async ({ expect }) => {
      const r = await runCase(c, corpus, config);
      results.push(r);
      results.sort((a, b) => cases.findIndex((x) => x.id === a.id) - cases.findIndex((x) => x.id === b.id));
      if (!c.asserted) return;
      expect(
        { neverProcessed: r.neverProcessed, runTwice: r.runTwice, twoxxUnprocessed: r.twoxxUnprocessed },
        summary(r),
      ).toEqual({
        neverProcessed: 0,
        runTwice: 0,
        twoxxUnprocessed: 0,
      });
    });
  }
});
