/** The figures of a fault suite run as a markdown table and as JSON (.tmp/faults-results.json). */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../../helpers/paths.js';
import type { CaseResult, RunConfig } from './run.js';

export interface SuiteMeta {
  mode: 'short' | 'full';
  startedAt: string;
  finishedAt?: string;
  deliveries: number;
  distinctJobs: number;
  duplicatesConcurrent: number;
  duplicatesLater: number;
  seed: number;
  config: RunConfig;
  machine: { cpu: string; cores: number; node: string; platform: string };
  git: { commit: string; receiverFilesChanged: string[] };
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return '';
  }
}

export function machineAndGit(): Pick<SuiteMeta, 'machine' | 'git'> {
  return {
    machine: {
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      node: process.version,
      platform: `${process.platform} ${process.arch}`,
    },
    git: {
      // JOBHOOK_FAULTS_CODE names the code when it is not a git checkout (e.g. a `git archive` of a commit).
      commit:
        git(['rev-parse', '--short', 'HEAD']) ||
        process.env.JOBHOOK_FAULTS_CODE ||
        'unknown (not a git checkout)',
      // Uncommitted changes in the code under test, so a baseline says what it measured.
      receiverFilesChanged: git([
        'status',
        '--porcelain',
        '--',
        'src/lib/receive',
        'src/lib/stores',
        'src/lib/jobs',
        'src/lib/adapters',
        'src/express.ts',
        'src/redis.ts',
        'src/postgres.ts',
      ])
        .split('\n')
        .filter(Boolean),
    },
  };
}

const cell = (x: number) => (x === 0 ? '0' : `**${x}**`);

export function markdownTable(results: CaseResult[]): string {
  const head =
    '| case | never processed | run twice | 2xx unprocessed | deliveries | attempts | 2xx | 4xx | 5xx | no answer | gave up | deliveries/s | p50 ms | p99 ms | send s |\n' +
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const rows = results.map(
    (r) =>
      `| ${r.title}${r.asserted ? '' : ' (limitation, not asserted)'} | ${cell(r.neverProcessed)} | ${cell(r.runTwice)} | ${cell(r.twoxxUnprocessed)} | ${r.deliveries} | ${r.attempts} | ${r.answers2xx} | ${r.answers4xx} | ${r.answers5xx} | ${r.noAnswer} | ${r.gaveUp} | ${r.throughput} | ${r.latencyP50Ms} | ${r.latencyP99Ms} | ${r.sendSeconds} |`,
  );
  return [head, ...rows].join('\n');
}

export function markdownDetails(results: CaseResult[]): string {
  const out: string[] = [];
  for (const r of results) {
    out.push(`#### ${r.title}`);
    out.push(
      `- store: ${r.store}; fault: ${r.fault}${r.faultTimeline ? ` (at ${r.faultTimeline.injectedAt} s, restored at ${r.faultTimeline.restoredAt} s)` : ''}; leaseMs: ${r.leaseMs}; slow jobs: ${r.slowJobs}`,
    );
    out.push(
      `- answers: ${Object.entries(r.answers)
        .map(([k, v]) => `${k} ×${v}`)
        .join(', ')}`,
    );
    out.push(
      `- receiver onError and log: ${
        Object.entries(r.receiverErrors)
          .map(([k, v]) => `${k} ×${v}`)
          .join(', ') || 'none'
      }`,
    );
    out.push(
      `- handler runs ${r.handlerRuns} (${r.extraRuns} beyond the first); grace ${r.graceMs} ms, unfinished at count ${r.unfinishedAtCount}; latency max ${r.latencyMaxMs} ms`,
    );
    for (const p of r.neverProcessedPatterns) out.push(`- never processed ×${p.jobs}: ${p.pattern}`);
    for (const p of r.runTwicePatterns) out.push(`- run twice ×${p.jobs}: ${p.pattern}`);
    for (const p of r.gaveUpProcessedPatterns)
      out.push(`- processed, but a delivery gave up ×${p.jobs}: ${p.pattern}`);
  }
  return out.join('\n');
}

export function writeResults(meta: SuiteMeta, results: CaseResult[]): string {
  const dir = join(ROOT, '.tmp');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'faults-results.json');
  writeFileSync(file, `${JSON.stringify({ meta, results }, null, 2)}\n`);
  writeFileSync(join(dir, 'faults-results.md'), `${markdownTable(results)}\n\n${markdownDetails(results)}\n`);
  return file;
}
