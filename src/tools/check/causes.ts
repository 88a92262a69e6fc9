/**
 * The likely cause of each loss and each acceptance, read across the deliveries: the
 * same 401 means a wrong key when the baseline is refused too, a non-canonical verifier
 * when only the floats are, a proxy when only the large ones are.
 */
import type { AttemptReport } from '../deliveries/send.js';
import { isSentEncoding } from '../deliveries/variants.js';
import type { CaseResult, CaseTag, PlannedCase, SendReport } from './types.js';
import { describeAnswer } from './classify.js';
import { formatBytes } from './units.js';

interface Context {
  byId: ReadonlyMap<string, CaseResult>;
  /** What was planned, by id: what each delivery held. */
  cases: ReadonlyMap<string, PlannedCase>;
  signatureHeader: string;
  timeoutMs: number;
  /** The smallest size's delivery was accepted. */
  smallPassed: boolean;
  /** Where a body limit lies, from the sizes: `from 150 kB on; 1 kB accepted`. */
  limit: string;
}

function passed(ctx: Context, id: string): boolean {
  return ctx.byId.get(id)?.verdict === 'passed';
}

/** The attempt that decided a failed delivery: the last one of its first failed sending. */
function decisive(sends: readonly SendReport[]): AttemptReport {
  const send = sends.find((s) => !s.delivered) ?? sends[sends.length - 1]!;
  return send.attempts[send.attempts.length - 1]!;
}

/** Causes that show in the answer alone, whatever was sent. */
function transportCause(c: PlannedCase, a: AttemptReport, ctx: Context): string | undefined {
  if (a.status === undefined) {
    if (a.timedOut)
      return `no answer within the ${ctx.timeoutMs / 1000} s per-attempt timeout, on every attempt`;
    if (/^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH)$/.test(a.error ?? ''))
      return `nothing answers at the URL (${a.error})`;
    if (c.tags.includes('large') && ctx.smallPassed)
      return `the connection was cut while a large body was sent (${a.error}): a body limit in front that closes the connection`;
    return `no answer (${a.error})`;
  }
  if (a.status >= 500) return `the endpoint failed on every attempt (${describeAnswer(a)})`;
  if (a.status >= 300 && a.status < 400)
    return `a redirect (HTTP ${a.status}): the gateway does not follow redirects; give it the final URL`;
  if (a.status === 404 || a.status === 405) return `HTTP ${a.status}: no POST route at this URL`;
  if (a.status === 413)
    return `a body limit in front of the verifier (HTTP 413${ctx.limit}): body-parser's default is 100 kB, Fastify's 1 MiB, nginx's 1 MB; the gateway sends up to 25 MB`;
  if (a.status === 408) return 'the body was not read in time (HTTP 408)';
  if (a.answer === 'EVENT_FROM_FUTURE' || a.answer === 'EVENT_TOO_OLD')
    return `the endpoint's clock is off (${describeAnswer(a)} on a delivery that finished just now)`;
  return undefined;
}

function baselineCause(a: AttemptReport, ctx: Context): string {
  const h = ctx.signatureHeader;
  if (a.answer === 'SIGNATURE_MISSING')
    return `every delivery refused: the signature header does not reach the verifier (a proxy drops or renames ${h}, or the endpoint expects another name)`;
  if (a.status === 401 || a.status === 403)
    return `every delivery refused (${describeAnswer(a)}): the endpoint does not trust this key, or ${h} does not reach its verifier (a proxy dropping or renaming it)`;
  return `even the plainest delivery is refused (${describeAnswer(a)})`;
}

const VALUE_CAUSES: ReadonlyArray<readonly [CaseTag, string]> = [
  [
    'floats',
    'a non-canonical verifier: floats the gateway writes as 1.0 or 0.0 come out as 1 or 0 (JSON.parse, then JSON.stringify)',
  ],
  ['big-integers', 'a non-canonical verifier: integers beyond 2^53 lose digits (JSON.parse)'],
  ['escapes', "a non-canonical verifier: string escapes are written differently from the sender's"],
  [
    'unicode',
    'a non-canonical verifier: keys sorted by UTF-16 units instead of code points, or text normalized or escaped',
  ],
];

/**
 * Why an encoded delivery was refused, from the same content sent unencoded (the sizes'
 * deliveries are written as the encoded ones are): refused as well, with the same answer,
 * the cause is the content's, whatever decoded the body (a body parser decodes gzip and
 * then re-serializes the floats); accepted, the encoding is.
 */
function codingCause(c: PlannedCase, coding: string, a: AttemptReport, ctx: Context): string {
  const answer = describeAnswer(a);
  const plain = [...ctx.byId.values()].filter((r) => {
    const tags = ctx.cases.get(r.id)?.tags ?? [];
    return r.group === 'genuine' && tags.includes('floats') && !tags.some(isSentEncoding);
  });
  const refusedAlike = (r: CaseResult) =>
    r.verdict === 'lost' && describeAnswer(decisive(r.sends)) === answer;
  // The delivery of the same size first: the same generator wrote both bodies.
  const twin = plain.find((r) => r.id === `genuine/size-${c.decodedBytes}`) ?? plain.find(refusedAlike);
  if (twin !== undefined && refusedAlike(twin) && twin.cause !== undefined) return twin.cause;
  const unencoded = plain.some((r) => r.verdict === 'passed')
    ? ' where the same content unencoded is accepted'
    : '';
  return `a ${coding}-encoded delivery refused (${answer})${unencoded}: decode Content-Encoding before verifying, or answer 415`;
}

/** Causes that depend on what was sent, the transport being fine. */
function contentCause(c: PlannedCase, a: AttemptReport, ctx: Context): string {
  const baseline = ctx.byId.get('genuine/baseline');
  if (c.id === 'genuine/baseline' || (baseline !== undefined && baseline.verdict === 'lost'))
    return baseline?.cause ?? baselineCause(a, ctx);
  const coding = c.tags.find(isSentEncoding);
  if (coding !== undefined) return codingCause(c, coding, a, ctx);
  if (c.tags.includes('unknown-fields') && (a.status === 400 || a.status === 422))
    return `fields it does not know refused (${describeAnswer(a)}): the gateway may add fields; keep them`;
  if (c.tags.includes('large') && ctx.smallPassed)
    return `${describeAnswer(a)} on large deliveries only: something in front re-encodes, truncates or blocks large bodies (a proxy, a CDN, a WAF)`;
  const kind = VALUE_CAUSES.find(([tag]) => c.tags.includes(tag));
  if (kind !== undefined && c.dialect !== 'orjson' && passed(ctx, `genuine/${kind[0]}/orjson`))
    return `the verifier does not try the ${c.dialect} canonical form (senders writing with Python's json.dumps)`;
  if (kind !== undefined) return kind[1];
  return `a genuine delivery refused (${describeAnswer(a)})`;
}

function lostCause(r: CaseResult, c: PlannedCase, ctx: Context): string {
  if (r.sends.every((s) => s.delivered))
    return 'answered 2xx, but the effects never showed the job: the handler did not run, or its effect was lost';
  const a = decisive(r.sends);
  return transportCause(c, a, ctx) ?? contentCause(c, a, ctx);
}

const SIGNATURE_CASES = [
  'refuse/tampered',
  'refuse/forged',
  'refuse/other-key',
  'refuse/header-missing',
  'refuse/header-renamed',
  'refuse/header-doubled',
];

/** A 2xx to what must be refused, whose job never ran: the danger is to genuine deliveries. */
const ANSWERS_FIRST =
  'answers 2xx to deliveries that do not verify, which then never run (it answers before verifying, or hides its refusals): the gateway takes a 2xx as delivered, so a genuine delivery that fails after it (its verification, the handler, a crash) is never retried, and is lost without a word';

function forgedCause(r: CaseResult, c: PlannedCase, ctx: Context): string {
  const a = decisive(r.sends);
  if (r.runs === 0 && a.status !== undefined && a.status < 300) return ANSWERS_FIRST;
  const verifies =
    passed(ctx, 'refuse/tampered') && passed(ctx, 'refuse/forged') && passed(ctx, 'refuse/other-key');
  if (!verifies && SIGNATURE_CASES.includes(c.id))
    return r.runs === undefined
      ? 'deliveries that do not verify are answered 2xx: the signature is not verified (anyone can post a delivery that runs), or it is verified after answering (then a genuine delivery that fails after the 2xx is never retried); counting the runs from the effects tells which'
      : 'the signature is not verified: anyone can post a delivery that is accepted';
  switch (c.id) {
    case 'refuse/header-missing':
    case 'refuse/header-renamed':
      return 'a delivery without its signature header is accepted';
    case 'refuse/header-doubled':
      return 'a signature header sent twice is accepted (the gateway sends one; intermediaries may pick either)';
    case 'refuse/too-old':
      return 'no replay window: a captured delivery can be replayed once its job id is forgotten';
    case 'refuse/future':
      return 'future-dated events are accepted: their completion mark can expire before the replay window closes';
    default:
      return 'a delivery that does not verify is accepted';
  }
}

const RAN_TWICE: Record<string, string> = {
  'retry/twice': "no idempotency on job_id: the gateway's retry ran the job again",
  'retry/concurrent': 'no claim on job_id: two deliveries at once both ran it',
  'retry/dropped': 'a retry after an attempt the sender gave up on ran the job again',
};

/** ` from 150 kB on; 1 kB accepted`: the sizes refused with 413 and the largest accepted below them. */
function limitHint(sized: ReadonlyArray<{ bytes: number; result: CaseResult }>): string {
  const refused = sized.find(({ result }) => result.sends[0]?.attempts.some((a) => a.status === 413));
  if (refused === undefined) return '';
  const below = sized
    .filter(({ bytes, result }) => bytes < refused.bytes && result.verdict === 'passed')
    .at(-1);
  return ` from ${formatBytes(refused.bytes)} on${below === undefined ? '' : `; ${formatBytes(below.bytes)} accepted`}`;
}

/** Sets the cause of every result that failed or was slow. */
export function assignCauses(
  results: CaseResult[],
  planned: readonly PlannedCase[],
  ctx: Pick<Context, 'signatureHeader' | 'timeoutMs'>,
): void {
  const byId = new Map(results.map((r) => [r.id, r]));
  const sized = planned
    .filter((c) => c.tags.includes('large'))
    .map((c) => ({ bytes: c.bytes, result: byId.get(c.id)! }));
  const full: Context = {
    ...ctx,
    byId,
    cases: new Map(planned.map((c) => [c.id, c])),
    smallPassed: sized[0]?.result.verdict === 'passed',
    limit: limitHint(sized),
  };
  // The baseline first: other causes refer to it.
  const order = [...results].sort(
    (a, b) => Number(b.id === 'genuine/baseline') - Number(a.id === 'genuine/baseline'),
  );
  for (const r of order) {
    const c = planned.find((p) => p.id === r.id)!;
    if (r.verdict === 'lost') r.cause = lostCause(r, c, full);
    else if (r.verdict === 'accepted-forged') r.cause = forgedCause(r, c, full);
    else if (r.verdict === 'ran-twice')
      r.cause = RAN_TWICE[r.id] ?? 'the job ran more than once for one delivery (a retry after a timeout?)';
    else if (r.verdict === 'slow')
      r.cause = `answers slower than the ${ctx.timeoutMs / 1000} s per-attempt timeout: the gateway gives up on the attempt and retries`;
  }
}
