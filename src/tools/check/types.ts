import type { DialectName } from '../../index.js';
import type { AttemptReport } from '../deliveries/send.js';
import type { SentEncoding } from '../deliveries/variants.js';

/** The three groups of the scorecard. */
export type CheckGroup = 'genuine' | 'refuse' | 'retry';

/**
 * What a delivery came to, as the gateway would see it:
 * - `passed`: a genuine one accepted (2xx, run once); one that must be refused refused;
 * - `lost`: a genuine one refused (4xx, a redirect), never answered within the retries, or never run;
 * - `accepted-forged`: one that must be refused answered 2xx, or run;
 * - `ran-twice`: a job run more than once;
 * - `slow`: accepted, but an attempt outlasted the per-attempt timeout (the gateway retries it);
 * - `skipped`: a Content-Encoding the receiver says it does not take (415; the gateway sends none);
 * - `no-answer`: not one attempt was answered, though the job ran (the gateway counts it
 *   undelivered), or a delivery that must be refused (whether it was is not known);
 * - `not-run`: not sent, the check was stopped or ran out of time.
 */
export type Verdict =
  'passed' | 'lost' | 'accepted-forged' | 'ran-twice' | 'slow' | 'skipped' | 'no-answer' | 'not-run';

/** Why a case was built as it was: what a naive receiver may trip over. */
export type CaseTag =
  | 'baseline'
  | 'floats'
  | 'big-integers'
  | 'escapes'
  | 'unicode'
  | 'shape'
  | 'unknown-fields'
  | 'large'
  | SentEncoding;

/** How a case's delivery is sent. */
export type SendMode =
  /** Once, with the gateway's retries (genuine deliveries). */
  | 'policy'
  /** One attempt (deliveries that must be refused: they do not come from the gateway). */
  | 'single'
  /** With the retries, then again once that ended. */
  | 'twice'
  /** Twice at the same moment, each with the retries. */
  | 'concurrent'
  /** First attempt cut once its body was sent (the gateway's attempt timing out), then the remaining attempts. */
  | 'dropped';

export interface PlannedCase {
  /** Short and stable: `genuine/floats/orjson`, `refuse/tampered`. */
  id: string;
  group: CheckGroup;
  /** What is sent, in words. */
  title: string;
  jobId: string;
  dialect: DialectName;
  tags: readonly CaseTag[];
  /** Bytes on the wire. */
  bytes: number;
  /** The body's size before Content-Encoding (its size otherwise). */
  decodedBytes: number;
  headers: Record<string, string>;
  body: string | Uint8Array;
  mode: SendMode;
}

/** One sending of a delivery, with each of its attempts. */
export interface SendReport {
  attempts: AttemptReport[];
  delivered: boolean;
  /** The first attempt was cut on purpose once its body was sent (mode `dropped`). */
  dropped?: boolean;
}

export interface CaseResult {
  id: string;
  group: CheckGroup;
  title: string;
  jobId: string;
  dialect: DialectName;
  bytes: number;
  sends: SendReport[];
  /** How many times the job ran, from the effects (absent without them). */
  runs?: number;
  verdict: Verdict;
  /** What the answers mean for the gateway, in words. */
  meaning: string;
  /** The likely cause of a loss or an acceptance. */
  cause?: string;
  /** Things worth knowing that change no verdict (a 503 without Retry-After…). */
  notes?: string[];
}

export type VerdictCounts = Record<Verdict, number>;

export interface CheckReport {
  url: string;
  seed: number;
  startedAt: string;
  durationMs: number;
  policy: { retries: number; timeoutMs: number; backoffMs: number; maxBackoffMs: number };
  /** Where "ran twice" and "lost" were counted from. */
  countedFrom: 'effects' | 'answers';
  counts: VerdictCounts;
  /** The likely causes of losses and acceptances, each with the ids of its deliveries. */
  causes: Array<{ cause: string; verdict: Verdict; ids: string[] }>;
  /** Answer time of the genuine deliveries by size, against the per-attempt timeout. */
  timing: Array<{ bytes: number; elapsedMs: number | undefined; status: number | undefined }>;
  results: CaseResult[];
  /** About the check itself: effects that could not be read, a time limit reached. */
  notes: string[];
  /**
   * Why the check stopped after its first deliveries, when they all failed the same way
   * (nothing answers at the URL, every answer a 5xx): the verdict, without the rest.
   */
  stoppedEarly?: string;
  /** True when nothing was lost, accepted forged, run twice, left unanswered or left unsent. */
  ok: boolean;
}

/** One attempt of a check's delivery, as it ends (`onAttempt`: a check's progress). */
export interface CheckAttempt {
  /** The delivery's place in the check, from 1, of `of`. */
  index: number;
  of: number;
  /** The delivery: `genuine/baseline`, `refuse/forged`… (the report's `results[].id`). */
  id: string;
  title: string;
  /** 1, or 2 for the second copy of a delivery sent twice. */
  copy: number;
  attempt: AttemptReport;
}
