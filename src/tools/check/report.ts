/** A check's report for people (a scorecard) and for CI (JSON). */
import { formatBytes } from './units.js';
import type { CaseResult, CheckGroup, CheckReport, Verdict } from './types.js';

const GROUPS: ReadonlyArray<readonly [CheckGroup, string]> = [
  ['genuine', 'Genuine deliveries (must be accepted: 2xx)'],
  ['refuse', 'Deliveries that must be refused (4xx, never 2xx)'],
  ['retry', "Retries and duplicates (the gateway's retry policy)"],
];

const MARKS: Record<Verdict, string> = {
  passed: 'passed',
  lost: 'LOST',
  'accepted-forged': 'FORGED',
  'ran-twice': 'TWICE',
  slow: 'SLOW',
  skipped: 'skipped',
  'no-answer': 'SILENT',
  'not-run': 'NOT RUN',
};

/** The scorecard's lines, one per class, in this order. */
const CLASSES: ReadonlyArray<readonly [Verdict, string]> = [
  ['passed', 'passed'],
  ['lost', 'lost'],
  ['accepted-forged', 'accepted forged'],
  ['ran-twice', 'ran twice'],
  ['slow', 'slow'],
];

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

function header(r: CheckReport): string {
  const p = r.policy;
  const policy = `${p.retries} retries, backoff ${seconds(p.backoffMs)} doubling to ${seconds(p.maxBackoffMs)}, ${seconds(p.timeoutMs)} per attempt`;
  const from =
    r.countedFrom === 'effects'
      ? 'runs counted from the effects'
      : 'runs read from the answers (no effects given)';
  return `jobhook check ${r.url}\n${r.results.length} deliveries in ${(r.durationMs / 1000).toFixed(1)} s · seed ${r.seed} · ${policy} · ${from}\n`;
}

function line(result: CaseResult, causeNumber: ReadonlyMap<string, number>): string {
  const n = result.cause === undefined ? undefined : causeNumber.get(result.cause);
  let text = `  ${MARKS[result.verdict].padEnd(7)} ${result.title} → ${result.meaning}${n === undefined ? '' : ` [${n}]`}\n`;
  for (const note of result.notes ?? []) text += `          note: ${note}\n`;
  return text;
}

function timing(r: CheckReport): string {
  if (r.timing.every((t) => t.elapsedMs === undefined)) return '';
  const sizes = r.timing.map(
    (t) =>
      `${formatBytes(t.bytes)} ${t.elapsedMs === undefined ? '-' : `${t.elapsedMs} ms`}${t.status === undefined || (t.status >= 200 && t.status < 300) ? '' : ` (${t.status})`}`,
  );
  return `\nAnswer time by size (first attempt; the gateway gives up on an attempt after ${seconds(r.policy.timeoutMs)})\n  ${sizes.join(' · ')}\n`;
}

function scorecard(r: CheckReport): string {
  const width = Math.max(...CLASSES.map(([v]) => String(r.counts[v]).length));
  let text = '\nScorecard\n';
  for (const [verdict, label] of CLASSES)
    text += `  ${label.padEnd(16)} ${String(r.counts[verdict]).padStart(width)}\n`;
  if (r.counts.skipped > 0)
    text += `  ${'skipped'.padEnd(16)} ${String(r.counts.skipped).padStart(width)}  (a Content-Encoding refused with 415: the gateway sends none)\n`;
  if (r.counts['no-answer'] > 0)
    text += `  ${'no answer'.padEnd(16)} ${String(r.counts['no-answer']).padStart(width)}  (not one attempt answered)\n`;
  if (r.counts['not-run'] > 0)
    text += `  ${'not run'.padEnd(16)} ${String(r.counts['not-run']).padStart(width)}\n`;
  return text;
}

function causes(r: CheckReport): string {
  if (r.causes.length === 0) return '';
  const lines = r.causes.map(
    (c, k) => `  [${k + 1}] ${c.cause} (${c.ids.length} ${c.ids.length === 1 ? 'delivery' : 'deliveries'})`,
  );
  return `\nLikely causes\n${lines.join('\n')}\n`;
}

function verdictLine(r: CheckReport): string {
  if (r.ok)
    return `\nPASS: nothing lost, nothing forged accepted, nothing run twice${r.counts.slow > 0 ? ` (${r.counts.slow} slow)` : ''}.\n`;
  const what = CLASSES.filter(([v]) => v !== 'passed' && v !== 'slow' && r.counts[v] > 0).map(
    ([v, label]) => `${r.counts[v]} ${label}`,
  );
  if (r.counts['no-answer'] > 0) what.push(`${r.counts['no-answer']} not answered`);
  if (r.counts['not-run'] > 0) what.push(`${r.counts['not-run']} not run`);
  return `\nFAIL: ${what.join(', ')}.\n`;
}

/**
 * A check's report as the `jobhook check` command prints it: a line per delivery, the
 * answer time by size, one line per class, the likely causes, PASS or FAIL.
 *
 * @example
 * ```ts
 * console.log(formatCheckReport(await checkReceiver(url, { privateKey })));
 * ```
 *
 * The report as a scorecard: a line per delivery (what was sent → what came back and
 * what it means for the gateway), the answer time by size, one line per class, the
 * likely causes, and PASS or FAIL.
 */
export function formatCheckReport(r: CheckReport): string {
  const causeNumber = new Map(r.causes.map((c, k) => [c.cause, k + 1]));
  let text = header(r);
  if (r.stoppedEarly !== undefined)
    text += `\nStopped early: ${r.stoppedEarly}${/[.?!]$/.test(r.stoppedEarly) ? '' : '.'} The other ${r.counts['not-run']} deliveries were not sent.\n`;
  for (const [group, title] of GROUPS) {
    // After an early stop, the deliveries not sent are counted, not listed.
    const results = r.results.filter(
      (x) => x.group === group && (r.stoppedEarly === undefined || x.verdict !== 'not-run'),
    );
    if (results.length === 0) continue;
    text += `\n${title}\n`;
    for (const result of results) text += line(result, causeNumber);
  }
  text += timing(r) + scorecard(r) + causes(r);
  for (const note of r.notes) text += `\nNote: ${note}\n`;
  return text + verdictLine(r);
}
