/**
 * Issue 35: the SQLite store under receiver faults. Two receiver processes
 * (harness/receiver-process.ts) share one database file; the gateway-like sender (3
 * retries, backoff 1 s doubling) offers the jobs at a fixed rate, 20 % of them sent twice
 * at once to both receivers; each handler records its effect in an fsync'd log and, in
 * transactional mode, writes a row through `context.transaction` (the same file, one
 * transaction with the completion). Faults: each receiver SIGKILLs itself, 2–5 s after it
 * began to listen, mid-handler (its effect written), between its handler and the completion, or
 * during the completion's commit (a thread of the process sends the SIGKILL 0–3 ms into
 * the completion's write transaction, whose COMMIT waits for the fsync), and is restarted
 * at once. After the load, the reconciler polls the jobs still pending.
 *
 *   npm run test:faults -- sqlite                 # full: 2,000 jobs per case at 100 jobs/s
 *   JOBHOOK_FAULTS=short npm run test:faults -- sqlite   # CI: 300 jobs per case, 4 cases, two at a time
 *
 * Needs node:sqlite (Node 22.13+): on Node 20 skipped with the reason
 * (scripts/test-node-majors.sh runs it on Node 22, 24 and 26).
 *
 * Asserted: transactional mode, 0 jobs lost, 0 with two rows, every handler run twice
 * (an effect outside the transaction) reported; default mode, 0 lost and every job run
 * twice reported (0 silent doubles). Results: .tmp/faults-sqlite-results.json and .md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createGatewayClient, type GatewayClient } from '../../src/gateway.js';
import { startGatewaySimulator, type GatewaySimulator } from '../../src/testing.js';
import { privatePem } from '../helpers/keys.js';
import { ROOT } from '../helpers/paths.js';
import { sqliteMissing } from '../helpers/sqlite.js';
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
const JOBS = Number(process.env.JOBHOOK_FAULTS_JOBS) || (mode === 'short' ? 300 : 2000);
const DUPLICATE_SHARE = 1 / 6;
const DELIVERIES = Math.round(JOBS * 1.2);

const config: ProcessRunConfig = {
  receivers: 2,
  concurrency: 64,
  ratePerSecond: mode === 'short' ? 40 : 100,
  policy: GATEWAY_POLICY,
  faultAt: 0.3,
  leaseMs: 5000,
  takeoverGraceMs: 2000,
};

const points = [
  { key: 'handler', label: 'receivers SIGKILLed mid-handler' },
  { key: 'complete', label: 'receivers SIGKILLed between the handler and the completion' },
  { key: 'commit', label: "receivers SIGKILLed during the completion's commit" },
] as const;
const all: ProcessCaseDef[] = [false, true].flatMap((transactional) =>
  points.map((p) => ({
    id: `sqlite${transactional ? '-tx' : ''}-kill-${p.key}`,
    title: `SQLite${transactional ? ' transactional' : ''}: ${p.label}`,
    store: 'sqlite' as const,
    transactional,
    fault: { kind: 'self-kill' as const, at: p.key },
  })),
);

/** The short mode's cases (CI): every kill point in transactional mode, and the completion's in the default one. */
const SHORT = new Set([
  'sqlite-kill-complete',
  'sqlite-tx-kill-handler',
  'sqlite-tx-kill-complete',
  'sqlite-tx-kill-commit',
]);
const cases = mode === 'short' ? all.filter((c) => SHORT.has(c.id)) : all;

const cell = (x: number) => (x === 0 ? '0' : `**${x}**`);
function table(results: Array<ProcessCaseResult & { caseSeconds: number }>): string {
  return [
    '| case | jobs | lost | run twice | reported / silent doubles | handler runs twice: reported / silent | lost before reconciler (recovered) | restarts | 2xx | 5xx | no answer | case s |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...results.map(
      (r) =>
        `| ${r.title} | ${r.distinctJobs} | ${cell(r.lost)} | ${r.transactional ? cell(r.runTwice) : r.runTwice} | ${r.reportedDoubles} / ${cell(r.silentDoubles)} | ${r.outsideDoubles - r.silentOutsideDoubles} / ${cell(r.silentOutsideDoubles)} | ${r.lostBeforeReconciler} (${r.reconcilerProcessed}) | ${r.receiverRestarts} | ${r.answers2xx} | ${r.answers5xx} | ${r.noAnswer} | ${r.caseSeconds} |`,
    ),
  ].join('\n');
}

describe.skipIf(sqliteMissing !== undefined)(
  `SQLite store under receiver faults (issue 35; ${mode}: ${JOBS} jobs per case at ${config.ratePerSecond} jobs/s, ${config.receivers} receiver processes on one file)${sqliteMissing === undefined ? '' : ` (skipped: ${sqliteMissing})`}`,
  () => {
    let corpus!: Corpus;
    let sim!: GatewaySimulator;
    let client!: GatewayClient;
    let bundle: Awaited<ReturnType<typeof bundleReceiver>> | undefined;
    const results: Array<ProcessCaseResult & { caseSeconds: number }> = [];
    const meta = { mode, startedAt: new Date().toISOString(), jobs: JOBS, config, ...machineAndGit() };

    beforeAll(async () => {
      bundle = await bundleReceiver();
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
        seed: 35,
        jobIds: ids,
      });
    }, 300_000);

    afterAll(async () => {
      await sim?.close();
      bundle?.remove();
      if (results.length === 0) return;
      const dir = join(ROOT, '.tmp');
      mkdirSync(dir, { recursive: true });
      const details = results
        .map(
          (r) =>
            `- ${r.title}: ${r.fault}; effects ${r.effects}${r.transactional ? ` rows (handler runs: ${r.handlerEffects})` : ''}; superseded reports ${r.supersededReports} naming ${r.supersededJobs} jobs; answers ${Object.entries(
              r.answers,
            )
              .slice(0, 6)
              .map(([k, v]) => `${k} ×${v}`)
              .join(
                ', ',
              )}${r.lostJobs.map((j) => `\n  - lost ${j.jobId}: ${j.story}`).join('')}${r.doubledJobs
              .filter((d) => !d.reported || r.transactional)
              .map((d) => `\n  - run twice ${d.jobId} (${d.reported ? 'reported' : 'SILENT'}): ${d.story}`)
              .join('')}`,
        )
        .join('\n');
      const md = `${table(results)}\n\n${details}\n`;
      writeFileSync(
        join(dir, 'faults-sqlite-results.json'),
        `${JSON.stringify({ meta: { ...meta, finishedAt: new Date().toISOString() }, results }, null, 2)}\n`,
      );
      writeFileSync(join(dir, 'faults-sqlite-results.md'), md);
      console.log(
        `\n## SQLite receiver faults (${mode}), ${meta.machine.cpu} × ${meta.machine.cores}, Node ${meta.machine.node}, ${meta.git.commit}\n\n${md}\n(written to .tmp/faults-sqlite-results.json)\n`,
      );
    });

    for (const c of cases) {
      it(c.title, { concurrent: mode === 'short', timeout: 900_000 }, async ({ expect }) => {
        const started = Date.now();
        const r = {
          ...(await runProcessCase(c, corpus, config, client, bundle!.file)),
          caseSeconds: Math.round((Date.now() - started) / 1000),
        };
        results.push(r);
        results.sort((a, b) => cases.findIndex((x) => x.id === a.id) - cases.findIndex((x) => x.id === b.id));
        const why = `${r.title}: ${JSON.stringify({ lost: r.lostJobs.slice(0, 3), doubled: r.doubledJobs.filter((d) => !d.reported || c.transactional).slice(0, 3) })}`;
        // The kills happened (a case whose receivers never died checked nothing).
        expect(r.receiverRestarts, why).toBeGreaterThan(0);
        if (c.transactional)
          expect(
            { lost: r.lost, runTwice: r.runTwice, silentOutsideDoubles: r.silentOutsideDoubles },
            why,
          ).toEqual({
            lost: 0,
            runTwice: 0,
            silentOutsideDoubles: 0,
          });
        else
          expect({ lost: r.lost, silentDoubles: r.silentDoubles }, why).toEqual({
            lost: 0,
            silentDoubles: 0,
          });
      });
    }
  },
);
