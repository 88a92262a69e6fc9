/**
 * `checkReceiver`: proves a deployed endpoint takes everything the gateway sends, from
 * outside, before the gateway finds out. Plans the deliveries (plan.ts), sends them as
 * the gateway would (run.ts), counts what ran (effects.ts), and judges each one
 * (classify.ts, causes.ts).
 */
import { assignCauses } from './causes.js';
import { FAILING, judge } from './classify.js';
import { settledEffects } from './effects.js';
import { resolveCheckOptions, type CheckOptions, type CheckSettings } from './options.js';
import { planCheck } from './plan.js';
import { sendCase } from './run.js';
import { attemptSignal } from '../deliveries/send.js';
import type { CaseResult, CheckReport, PlannedCase, SendReport, Verdict, VerdictCounts } from './types.js';

interface Sent {
  sends: Map<string, SendReport[]>;
  /** Why the rest was not sent, when the check stopped early. */
  stopped?: string;
}

async function sendAll(s: CheckSettings, planned: readonly PlannedCase[]): Promise<Sent> {
  // The per-attempt timer of sendDelivery, here over the whole check.
  const limit = attemptSignal(s.timeLimitMs, s.signal);
  const sends = new Map<string, SendReport[]>();
  try {
    for (const c of planned) {
      if (limit.signal.aborted) break;
      try {
        sends.set(c.id, await sendCase({ s, signal: limit.signal }, c));
      } catch (err) {
        if (!limit.signal.aborted) throw err;
      }
    }
  } finally {
    limit.done();
  }
  if (!limit.signal.aborted) return { sends };
  const byCaller = s.signal?.aborted === true;
  return {
    sends,
    stopped: byCaller
      ? `cancelled (${String((s.signal!.reason as Error)?.message ?? s.signal!.reason)})`
      : `the check's time limit (${s.timeLimitMs} ms) was reached`,
  };
}

/** How many times each job ran, from the effects; undefined without them, a note when they cannot be read. */
async function countRuns(
  s: CheckSettings,
  planned: readonly PlannedCase[],
  sent: Sent,
  notes: string[],
): Promise<Map<string, number> | undefined> {
  if (s.effects === undefined) return undefined;
  const expected = planned
    .filter((c) => c.group !== 'refuse' && sent.sends.get(c.id)?.some((r) => r.delivered))
    .map((c) => c.jobId);
  try {
    return await settledEffects(
      s.effects,
      expected,
      s.effectsWaitMs,
      AbortSignal.timeout(s.effectsWaitMs + 30_000),
    );
  } catch (err) {
    notes.push(
      `the effects could not be read (${(err as Error).message}): runs were read from the answers only`,
    );
    return undefined;
  }
}

function resultOf(
  c: PlannedCase,
  sends: SendReport[] | undefined,
  runs: Map<string, number> | undefined,
  stopped: string | undefined,
): CaseResult {
  const base = {
    id: c.id,
    group: c.group,
    title: c.title,
    jobId: c.jobId,
    dialect: c.dialect,
    bytes: c.bytes,
  };
  if (sends === undefined)
    return { ...base, sends: [], verdict: 'not-run', meaning: `not sent: ${stopped ?? 'the check stopped'}` };
  const count = runs === undefined ? undefined : (runs.get(c.jobId) ?? 0);
  const judged = judge(c, sends, count);
  return {
    ...base,
    sends,
    ...(count === undefined ? {} : { runs: count }),
    ...judged,
    ...(judged.notes === undefined ? {} : { notes: judged.notes }),
  };
}

function counting(results: readonly CaseResult[]): VerdictCounts {
  const counts: VerdictCounts = {
    passed: 0,
    lost: 0,
    'accepted-forged': 0,
    'ran-twice': 0,
    slow: 0,
    skipped: 0,
    'not-run': 0,
  };
  for (const r of results) counts[r.verdict]++;
  return counts;
}

function causesOf(results: readonly CaseResult[]): CheckReport['causes'] {
  const causes = new Map<string, { cause: string; verdict: Verdict; ids: string[] }>();
  for (const r of results) {
    if (r.cause === undefined) continue;
    const entry = causes.get(r.cause) ?? { cause: r.cause, verdict: r.verdict, ids: [] };
    entry.ids.push(r.id);
    causes.set(r.cause, entry);
  }
  return [...causes.values()];
}

function timingOf(planned: readonly PlannedCase[], results: readonly CaseResult[]): CheckReport['timing'] {
  return planned
    .filter((c) => c.tags.includes('large'))
    .map((c) => {
      const a = results.find((r) => r.id === c.id)?.sends[0]?.attempts[0];
      return { bytes: c.bytes, elapsedMs: a?.elapsedMs, status: a?.status };
    });
}

/** Runs a check; see `checkReceiver` in `jobhook/testing`. */
export async function checkReceiver(url: string, options: CheckOptions): Promise<CheckReport> {
  const s = resolveCheckOptions(url, options);
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const planned = planCheck(s);
  const sent = await sendAll(s, planned);
  const notes = sent.stopped === undefined ? [] : [`stopped before the end: ${sent.stopped}`];
  const runs = await countRuns(s, planned, sent, notes);
  const results = planned.map((c) => resultOf(c, sent.sends.get(c.id), runs, sent.stopped));
  assignCauses(results, planned, {
    signatureHeader: s.headers.signatureHeader,
    timeoutMs: s.policy.timeoutMs,
  });
  const counts = counting(results);
  return {
    url: s.url.href,
    seed: s.seed,
    startedAt,
    durationMs: Math.round(performance.now() - t0),
    policy: { ...s.policy },
    countedFrom: runs === undefined ? 'answers' : 'effects',
    counts,
    causes: causesOf(results),
    timing: timingOf(planned, results),
    results,
    notes,
    ok: FAILING.every((v) => counts[v] === 0),
  };
}

export type { CheckOptions, EffectsSource } from './options.js';
export { CHECK_OPTIONS } from './options.js';
export type * from './types.js';
