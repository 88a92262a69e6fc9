/**
 * What each delivery's answers (and, when given, the receiver's effects) mean for the
 * gateway: a verdict per delivery and its meaning in words. The likely causes, read
 * across the deliveries, are causes.ts's.
 */
import type { AttemptReport } from '../deliveries/send.js';
import { isSentEncoding } from '../deliveries/variants.js';
import type { CaseResult, PlannedCase, SendReport, Verdict } from './types.js';

type Judged = Pick<CaseResult, 'verdict' | 'meaning' | 'notes'>;

function last(send: SendReport): AttemptReport {
  return send.attempts[send.attempts.length - 1]!;
}

function timedOut(sends: readonly SendReport[]): boolean {
  return sends.some((s) => s.attempts.some((a) => a.timedOut === true));
}

/** `HTTP 413 BODY_TOO_LARGE`, `ECONNRESET`, `timed out after 30000 ms`. */
export function describeAnswer(a: AttemptReport): string {
  if (a.status === undefined) return a.error ?? 'no answer';
  return `HTTP ${a.status}${a.answer === undefined ? '' : ` ${a.answer}`}`;
}

/** Why the gateway would see a genuine delivery as not delivered, in its terms. */
function notDelivered(send: SendReport): string {
  const a = last(send);
  if (a.outcome === 'gave-up')
    return `${describeAnswer(a)} on all ${send.attempts.length} attempts: the gateway gives up, the job is lost`;
  if (a.status !== undefined && a.status < 400)
    return `${describeAnswer(a)}: the gateway does not follow redirects, the job is lost`;
  return `${describeAnswer(a)}: the gateway does not retry a 4xx, the job is lost`;
}

/** `HTTP 503 IN_PROGRESS (Retry-After 1) → HTTP 200 duplicate in 4 ms`: each attempt, the last one timed. */
function delivered(send: SendReport): string {
  const a = last(send);
  const before = send.attempts
    .slice(0, -1)
    .map(
      (x) => `${describeAnswer(x)}${x.retryAfter === undefined ? '' : ` (Retry-After ${x.retryAfter})`} → `,
    );
  return `${before.join('')}${describeAnswer(a)} in ${a.elapsedMs} ms`;
}

/** Notes on answers that change no verdict but say something: a 503 without Retry-After. */
function answerNotes(sends: readonly SendReport[]): string[] | undefined {
  const bare = sends.some((s) => s.attempts.some((a) => a.status === 503 && a.retryAfter === undefined));
  return bare
    ? ["a 503 without Retry-After: the answer does not say when to come back (jobhook's receivers do)"]
    : undefined;
}

function slowMeaning(send: SendReport): string {
  return `${delivered(send)}, but an attempt got no answer within the per-attempt timeout: the gateway retries it (the job may run twice)`;
}

function judgeGenuine(c: PlannedCase, sends: readonly SendReport[], runs: number | undefined): Judged {
  const send = sends[0]!;
  const notes = answerNotes(sends);
  if (runs !== undefined && runs >= 2)
    return { verdict: 'ran-twice', meaning: `${delivered(send)}, but the job ran ${runs} times`, notes };
  if (!send.delivered) {
    const a = last(send);
    if (c.tags.some(isSentEncoding) && a.status === 415)
      return {
        verdict: 'skipped',
        meaning: `${describeAnswer(a)}: this Content-Encoding is not taken, which is fine (the gateway sends bodies unencoded)`,
      };
    if (runs === 1 && timedOut(sends))
      return {
        verdict: 'slow',
        meaning: `${notDelivered(send).replace(/, the job is lost$/, '')}; the job ran all the same (in the effects)`,
        notes,
      };
    if (runs === 1 && !send.attempts.some((x) => x.status !== undefined))
      return {
        verdict: 'no-answer',
        meaning: `${notDelivered(send).replace(/, the job is lost$/, '')}, though the job ran (in the effects): the gateway counts it undelivered`,
        notes,
      };
    if (runs === 1)
      return {
        verdict: 'passed',
        meaning: `ran (in the effects), though answered ${describeAnswer(a)}`,
        notes,
      };
    return { verdict: 'lost', meaning: notDelivered(send), notes };
  }
  if (runs === 0)
    return {
      verdict: 'lost',
      meaning: `${delivered(send)}, but the job never ran (not in the effects)`,
      notes,
    };
  if (timedOut(sends)) return { verdict: 'slow', meaning: slowMeaning(send), notes };
  return { verdict: 'passed', meaning: `accepted: ${delivered(send)}`, notes };
}

function judgeRefusal(sends: readonly SendReport[], runs: number | undefined): Judged {
  const a = last(sends[0]!);
  if (a.status !== undefined && a.status >= 200 && a.status < 300)
    return {
      verdict: 'accepted-forged',
      meaning: `${describeAnswer(a)}: accepted${runs === undefined ? '' : runs > 0 ? ', and the job ran' : ', though the job never ran (in the effects)'}`,
    };
  if (runs !== undefined && runs > 0)
    return {
      verdict: 'accepted-forged',
      meaning: `${describeAnswer(a)}, but the job ran ${runs === 1 ? 'once' : `${runs} times`} (in the effects)`,
    };
  if (a.status !== undefined && a.status >= 400 && a.status < 500)
    return { verdict: 'passed', meaning: `refused: ${describeAnswer(a)}` };
  if (a.status === undefined)
    return {
      verdict: 'no-answer',
      meaning: `${describeAnswer(a)}: no answer, so whether it was refused is not known (a 4xx says so)`,
    };
  return {
    verdict: 'passed',
    meaning: `${describeAnswer(a)}: not accepted, though 4xx is the answer to what does not verify (a 5xx asks for a retry)`,
  };
}

/** Runs of a retried job as the answers tell them (a jobhook receiver says processed or duplicate), when they do. */
function runsFromAnswers(sends: readonly SendReport[]): number | undefined {
  const answers = sends.map((s) => last(s).answer);
  if (answers.some((a) => a !== 'processed' && a !== 'duplicate')) return undefined;
  return answers.filter((a) => a === 'processed').length;
}

function judgeRetry(c: PlannedCase, sends: readonly SendReport[], runs: number | undefined): Judged {
  const notes = answerNotes(sends);
  const failed = sends.find((s) => !s.delivered);
  if (failed !== undefined) return { verdict: 'lost', meaning: notDelivered(failed), notes };
  const told =
    c.mode === 'concurrent'
      ? `at once: ${sends.map(delivered).join(' | ')}`
      : sends.map(delivered).join('; then ');
  const counted = runs ?? (c.mode === 'dropped' ? undefined : runsFromAnswers(sends));
  const from = runs === undefined ? 'as the answers say' : 'in the effects';
  if (counted !== undefined && counted >= 2)
    return { verdict: 'ran-twice', meaning: `${told}: the job ran ${counted} times (${from})`, notes };
  if (counted === 0 && runs !== undefined)
    return { verdict: 'lost', meaning: `${told}, but the job never ran (not in the effects)`, notes };
  if (timedOut(sends))
    return { verdict: 'slow', meaning: `${told}; an attempt outlasted the per-attempt timeout`, notes };
  const once =
    counted === 1
      ? `: ran once (${from})`
      : ': whether it ran again is not known (no effects, and the answers do not say)';
  return { verdict: 'passed', meaning: `${told}${once}`, notes };
}

/** The verdict of one delivery from its answers and, when known, how many times its job ran. */
export function judge(c: PlannedCase, sends: readonly SendReport[], runs: number | undefined): Judged {
  if (c.group === 'refuse') return judgeRefusal(sends, runs);
  if (c.group === 'retry') return judgeRetry(c, sends, runs);
  return judgeGenuine(c, sends, runs);
}

/** The verdicts that fail a check. */
export const FAILING: readonly Verdict[] = ['lost', 'accepted-forged', 'ran-twice', 'no-answer', 'not-run'];
