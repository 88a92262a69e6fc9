/**
 * `checkReceiver`: proves a deployed endpoint takes everything the gateway sends, from
 * outside, before the gateway finds out. Plans the deliveries (plan.ts), sends them as
 * the gateway would (run.ts), counts what ran (effects.ts), and judges each one
 * (classify.ts, causes.ts).
 */
import { assignCauses } from './causes.js';
import { describeAnswer, FAILING, judge } from './classify.js';
import { settledEffects } from './effects.js';
import { resolveCheckOptions, type CheckOptions, type CheckSettings } from './options.js';
import { buildDeferred, planCheck } from './plan.js';
import { sendCase, type Sending } from './run.js';
import { attemptSignal, type AttemptReport } from '../deliveries/send.js';
import type { CaseResult, CheckReport, PlannedCase, SendReport, Verdict, VerdictCounts } from './types.js';

interface Sent {
  sends: Map<string, SendReport[]>;
  /** Why the rest was not sent, when the check stopped early. */
  stopped?: string;
  /** The verdict of first deliveries that all failed the same way (the check stopped after them). */
  early?: string;
}

/** Deliveries sent at once first: when they all fail the same way, the check stops after them. */
const FIRST = 3;

/** How an attempt failed, when that is how an endpoint fails whatever it is sent: no answer, or a 5xx. */
function failureWay(a: AttemptReport): string | undefined {
  if (a.status !== undefined) return a.status >= 500 ? '5xx' : undefined;
  return a.timedOut ? 'timeout' : `error ${a.error}`;
}

/**
 * The verdict when the first deliveries were all lost, every attempt failing the same way
 * (nothing answers at the URL, or every answer a 5xx): what follows would fail the same
 * way, each after the gateway's retries (minutes, for a check that would say nothing new).
 */
export function uniformFailure(
  first: ReadonlyArray<SendReport[] | undefined>,
  s: Pick<CheckSettings, 'url' | 'policy'>,
): string | undefined {
  if (first.length === 0 || first.some((x) => x === undefined || x.some((r) => r.delivered)))
    return undefined;
  const attempts = first.flatMap((x) => x!.flatMap((r) => r.attempts));
  const ways = new Set(attempts.map(failureWay));
  const [way] = ways;
  if (ways.size !== 1 || way === undefined) return undefined;
  const every = `every attempt of the first ${first.length} deliveries (${attempts.length} attempts)`;
  const error = attempts[0]!.error;
  if (way === '5xx') {
    const answers = [...new Set(attempts.map(describeAnswer))];
    return `${every} was answered 5xx (${answers.slice(0, 3).join(', ')}${answers.length > 3 ? ', …' : ''}): the endpoint fails before it takes any delivery`;
  }
  if (way === 'timeout')
    return `${every} got no answer within the ${s.policy.timeoutMs / 1000} s per-attempt timeout: nothing answers at ${s.url.href}, or something in front holds the connections`;
  if (/^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)$/.test(error ?? ''))
    return `nothing answers at ${s.url.href} (${error} on ${every}): is the receiver running, and is this its URL?`;
  return `${every} got no answer (${error})`;
}

async function sendAll(s: CheckSettings, planned: readonly PlannedCase[]): Promise<Sent> {
  // The per-attempt timer of sendDelivery, here over the whole check.
  const limit = attemptSignal(s.timeLimitMs, s.signal);
  const sends = new Map<string, SendReport[]>();
  const send = async (c: PlannedCase, index: number) => {
    const tell = progress(s, c, index, planned.length);
    try {
      sends.set(c.id, await sendCase({ s, signal: limit.signal, tell }, c));
    } catch (err) {
      if (!limit.signal.aborted) throw err;
    }
  };
  let early: string | undefined;
  try {
    // At once: against an endpoint that fails whatever it gets, the verdict comes after one retry policy.
    await Promise.all(planned.slice(0, FIRST).map(send));
    early = uniformFailure(
      planned.slice(0, FIRST).map((c) => sends.get(c.id)),
      s,
    );
    if (early === undefined) buildDeferred(planned);
    for (let k = FIRST; k < planned.length && early === undefined && !limit.signal.aborted; k++)
      await send(planned[k]!, k);
  } finally {
    limit.done();
  }
  if (early !== undefined)
    return { sends, early, stopped: `the first ${FIRST} deliveries all failed the same way` };
  if (!limit.signal.aborted) return { sends };
  const byCaller = s.signal?.aborted === true;
  return {
    sends,
    stopped: byCaller
      ? `cancelled (${String((s.signal!.reason as Error)?.message ?? s.signal!.reason)})`
      : `the check's time limit (${s.timeLimitMs} ms) was reached`,
  };
}

/** What tells `onAttempt` of the attempts of case `c` (the `index`th of `of`), when it is given. */
function progress(s: CheckSettings, c: PlannedCase, index: number, of: number): Sending['tell'] {
  const { onAttempt } = s;
  if (onAttempt === undefined) return undefined;
  return (attempt, copy) => onAttempt({ index: index + 1, of, id: c.id, title: c.title, copy, attempt });
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
    'no-answer': 0,
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

/**
 * Checks a deployed receiver from outside, as the gateway would see it: signs
 * deliveries with `privateKey` (a TEST-ONLY key whose public key the receiver trusts),
 * sends them to `url` and judges each answer. Genuine deliveries in every dialect with
 * floats, big integers, escapes and Unicode generated from `seed`, every documented job
 * shape, sizes up to 25 MB and gzip/br must be accepted; tampered, forged, other-key,
 * header missing/renamed/doubled, too old and future-dated ones must be refused; the
 * same delivery twice, twice at once and after a cut attempt must run once. Each
 * delivery ends `passed`, `lost`, `accepted-forged`, `ran-twice`, `slow`, `skipped`,
 * `no-answer` or `not-run`, with the likely cause read across the deliveries;
 * `report.ok` is false when anything was lost, accepted forged, run twice, left
 * unanswered or not run. `effects` (a URL answering the job ids the handler ran, or a
 * function) lets runs be counted from what ran, not from the answers. When the first
 * three deliveries (sent at once) all fail the same way, every attempt unanswered or
 * answered 5xx, the check stops there: `report.stoppedEarly` says why. `onAttempt` is
 * told of each attempt as it ends. Every delivery carries `X-Jobhook-Check: <its id>`
 * (`refuse/forged`…) and `User-Agent: jobhook-check/<version>`.
 *
 * @example
 * ```ts
 * import { checkReceiver, formatCheckReport } from 'jobhook/testing';
 *
 * const report = await checkReceiver('https://staging.example.com/webhooks/gateway', {
 *   privateKey: process.env.TEST_PRIVATE_KEY!, // the receiver under test trusts its public key
 *   effects: async () => (await db.query('SELECT job_id FROM results')).rows.map((r) => r.job_id),
 * });
 * console.log(formatCheckReport(report));
 * if (!report.ok) process.exitCode = 1;
 *
 * // Progress as it goes, e.g. in a deployment pipeline's log:
 * await checkReceiver(url, { privateKey, onAttempt: (a) => console.error(`${a.index}/${a.of} ${a.id}`) });
 * ```
 * @throws OptionError (a TypeError) for plain http:// to a host that is not loopback
 * (unless `allowInsecure`), a key that is not an RSA private key, or bad options.
 */
export async function checkReceiver(url: string, options: CheckOptions): Promise<CheckReport> {
  const s = resolveCheckOptions(url, options);
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const planned = planCheck(s);
  const sent = await sendAll(s, planned);
  // An early stop is the report's verdict (stoppedEarly), not a note about the check.
  const notes =
    sent.stopped === undefined || sent.early !== undefined ? [] : [`stopped before the end: ${sent.stopped}`];
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
    ...(sent.early === undefined ? {} : { stoppedEarly: sent.early }),
    ok: FAILING.every((v) => counts[v] === 0),
  };
}

export type { CheckOptions, EffectsSource } from './options.js';
export { CHECK_OPTIONS } from './options.js';
export type * from './types.js';
