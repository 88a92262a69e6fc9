/**
 * The one receiver every adapter shares: a signed body in, an answer out. Verify, run
 * the job through the job runner (claim, handler, completion), answer per the protocol,
 * and say what happened (log, telemetry, `onDelivery`). Adapters only read the body and
 * send the answer.
 */
import { isWebhookError } from '../base/errors.js';
import { errorDetails } from '../base/log.js';
import type { DialectName } from '../core/canonical/dialects.js';
import { parseRfc3339 } from '../core/event.js';
import type { VerifiedDelivery } from '../core/verify/core.js';
import { eventContext } from '../jobs/context.js';
import { retentionMs, type ClaimContext, type RunResult } from '../jobs/runner.js';
import { AttributeSets, fail, type SpanLike } from '../runtime/telemetry.js';
import type { VerifyRuntime } from '../runtime/verify/offload.js';
import { answerForError, answerForRun, type ReceiverAnswer } from './answers.js';
import { ClientAbortedError } from './body.js';
import type { ReceiverConfig } from './config.js';
import { Diagnosis } from './diagnose.js';
import type { HeadersInput } from '../core/verify/headers.js';
import type { SignedBody } from './signed-body.js';
import type { AdapterName, DeliveryOutcome, DeliveryOutcomeKind } from './types.js';
import { Verification, type KnownReplay, type OwnVerified } from './verification.js';

const codeOf = (err: unknown): string =>
  isWebhookError(err) ? err.code : err instanceof ClientAbortedError ? 'CLIENT_ABORTED' : 'INTERNAL_ERROR';

/** The outcome kind of an answer that is not a 2xx. */
function outcomeOf(status: number, code: string): DeliveryOutcomeKind {
  if (status < 500) return 'refused';
  if (code === 'STORE_UNAVAILABLE') return 'unavailable';
  if (status === 503) return 'busy';
  return 'failed';
}

/** The error code answered for each run result that is not a 2xx. */
const RUN_CODE: Record<Exclude<RunResult['kind'], 'processed' | 'duplicate'>, string> = {
  in_progress: 'IN_PROGRESS',
  handler_failed: 'HANDLER_FAILED',
  store_unavailable: 'STORE_UNAVAILABLE',
  claim_lost: 'CLAIM_LOST',
};

/**
 * Attribute sets, made once and reused by every record: `{ adapter }` (metrics),
 * `{ 'jobhook.adapter' }` (spans), and per adapter `jobhook.deliveries`' `{ outcome, adapter, code?, dialect? }`.
 */
const METRIC_ADAPTER = new AttributeSets((adapter) => ({ adapter }));
const SPAN_ADAPTER = new AttributeSets((adapter) => ({ 'jobhook.adapter': adapter }));
const deliverySets = (adapter: AdapterName) =>
  new AttributeSets((outcome, code, dialect) => ({
    outcome,
    adapter,
    ...(code === undefined ? {} : { code }),
    ...(dialect === undefined ? {} : { dialect }),
  }));

/** What `delivered` records of a delivery. */
interface Told {
  outcome: DeliveryOutcomeKind;
  code?: string;
  jobId?: string;
  dialect?: DialectName;
  started: number | undefined;
  bodyBytes: number;
}

export class Receiver<Req, K = unknown> {
  readonly verification: Verification<K>;
  /** Tells why deliveries were refused, loud where it points at this receiver's setup. */
  readonly diagnosis: Diagnosis;
  private readonly deliveries: AttributeSets;
  /** Jobs this receiver is running now: a replay of one is answered IN_PROGRESS without a store claim. */
  private readonly running = new Set<string>();

  constructor(
    readonly config: ReceiverConfig<Req, K>,
    runtime: VerifyRuntime<K>,
  ) {
    this.verification = new Verification(config, runtime);
    this.diagnosis = new Diagnosis(config.log, this.verification);
    this.deliveries = deliverySets(config.adapter);
  }

  /**
   * Receives one delivery whose signature opened and whose bytes are in hand. `started`:
   * when the request began (performance.now()).
   */
  receive(signed: SignedBody, request: Req, started: number = performance.now()): Promise<ReceiverAnswer> {
    const { telemetry, adapter } = this.config;
    const bodyBytes = typeof signed.bytes === 'string' ? signed.bytes.length : signed.bytes.byteLength;
    telemetry.bodySize?.record(bodyBytes, METRIC_ADAPTER.get(adapter));
    return telemetry.within('jobhook.receive', 'server', SPAN_ADAPTER.get(adapter), (span) =>
      this.delivery(signed, request, span, started, bodyBytes),
    );
  }

  /**
   * One delivery as one path: a signature known completed answered at once, else verify,
   * run the job, remember the signature once completed, answer. Each step is awaited only
   * when it is asynchronous (on Node, with the memory store: the verification's flight and
   * the job run).
   */
  private async delivery(
    signed: SignedBody,
    request: Req,
    span: SpanLike | undefined,
    started: number,
    bodyBytes: number,
  ): Promise<ReceiverAnswer> {
    const { config } = this;
    const { telemetry } = config;
    const knowing = this.verification.known(signed.signature, signed.bytes, config.clock.now());
    if (knowing !== undefined) {
      const known = knowing instanceof Promise ? await knowing : knowing;
      return this.replayed(known, signed, span, started, bodyBytes);
    }
    let verified: OwnVerified;
    const verifying = telemetry.verifyDuration === undefined ? 0 : performance.now();
    try {
      verified = await telemetry.phase('jobhook.verify', () =>
        this.verification.verify(signed.bytes, signed.signature, signed.owned),
      );
    } catch (err) {
      return this.failed(span, err, started, bodyBytes, signed.headers);
    } finally {
      telemetry.verifyDuration?.record(
        (performance.now() - verifying) / 1000,
        METRIC_ADAPTER.get(config.adapter),
      );
    }
    return this.run(verified, signed, request, span, started, bodyBytes);
  }

  /**
   * Runs a verified delivery's job (a job this receiver is running now is answered 503
   * IN_PROGRESS from memory: a replay of it costs no store claim), remembers its
   * signature once completed, and answers.
   */
  private async run(
    verified: OwnVerified,
    signed: SignedBody,
    request: Req,
    span: SpanLike | undefined,
    started: number,
    bodyBytes: number,
  ): Promise<ReceiverAnswer> {
    const { config } = this;
    const { telemetry } = config;
    const { delivery } = verified;
    const { event, jobId } = delivery;
    span?.setAttribute('jobhook.job_id', jobId);
    span?.setAttribute('jobhook.dialect', delivery.dialect);
    // Kept until the replay window closes on this event on every receiver, however its
    // finished_at and the receipt relate, and however far apart (up to the skew tolerated)
    // the receivers' clocks are.
    const now = config.clock.now();
    const finished = parseRfc3339(event.finished_at);
    if (finished !== undefined)
      telemetry.deliveryLag?.record(Math.max(0, now - finished) / 1000, METRIC_ADAPTER.get(config.adapter));
    const retainMs = retentionMs(config.markMs, now, finished);
    const result = this.running.has(jobId)
      ? ({ kind: 'in_progress', retryAfterMs: undefined } as const)
      : await this.runOnce(jobId, () =>
          config.runner.run(jobId, this.handlerFor(delivery, request), { retainMs, finishedAt: finished }),
        );
    if (result.kind === 'duplicate' || result.kind === 'in_progress')
      config.log.debug(`jobhook: job ${jobId}: ${result.kind.replace('_', ' ')}`);
    // Completed: the same signature and bytes again are answered duplicate without canonical work, while the window is open.
    // A shared result came with the same bytes: the request that verified them remembers them.
    if (verified.own && (result.kind === 'processed' || result.kind === 'duplicate')) {
      // Never past the replay window on finished_at: a replay after it must meet EVENT_TOO_OLD, not a duplicate answer.
      const until =
        finished !== undefined && config.windowMs > 0
          ? Math.min(now + retainMs, finished + config.windowMs)
          : now + retainMs;
      const remembering = this.verification.remember(signed.signature, jobId, verified, signed.bytes, until);
      if (remembering !== undefined) await remembering;
    }
    return this.answered(result, delivery, span, started, bodyBytes);
  }

  /** The application's handler for a verified delivery, as the runner calls it. */
  private handlerFor(
    delivery: VerifiedDelivery,
    request: Req,
  ): (claim: ClaimContext) => void | Promise<void> {
    const { config } = this;
    const { event, payload, jobId, dialect, keyIndex, canonicalSha256 } = delivery;
    return (claim) =>
      config.onEvent(
        event,
        eventContext(
          { source: 'webhook' as const, dialect, keyIndex, canonicalSha256, request },
          jobId,
          payload,
          claim,
        ),
      );
  }

  /** The answer to a signature known completed here: duplicate for its bytes, 401 for any other body. */
  private replayed(
    known: KnownReplay,
    signed: SignedBody,
    span: SpanLike | undefined,
    started: number,
    bodyBytes: number,
  ): ReceiverAnswer {
    if (known.kind === 'refused') return this.failed(span, known.error, started, bodyBytes, signed.headers);
    this.config.log.debug(
      `jobhook: job ${known.jobId}: duplicate (its signature and bytes were verified and completed here)`,
    );
    return this.delivered(answerForRun({ kind: 'duplicate' }, known.jobId, undefined), {
      outcome: 'duplicate',
      jobId: known.jobId,
      started,
      bodyBytes,
    });
  }

  /** Runs a job, noted as running here until it ends. */
  private async runOnce(jobId: string, run: () => Promise<RunResult>): Promise<RunResult> {
    this.running.add(jobId);
    try {
      return await run();
    } finally {
      this.running.delete(jobId);
    }
  }

  private answered(
    result: RunResult,
    delivery: VerifiedDelivery,
    span: SpanLike | undefined,
    started: number,
    bodyBytes: number,
  ): ReceiverAnswer {
    const { jobId, dialect } = delivery;
    const answer = answerForRun(result, jobId, this.config.retryAfterSeconds);
    if (result.kind === 'processed' || result.kind === 'duplicate')
      return this.delivered(answer, { outcome: result.kind, jobId, dialect, started, bodyBytes });
    const code = RUN_CODE[result.kind];
    fail(span, undefined, code);
    return this.delivered(answer, {
      outcome: outcomeOf(answer.status, code),
      code,
      jobId,
      dialect,
      started,
      bodyBytes,
    });
  }

  /**
   * The answer for a delivery refused before its job ran (or a body that could not be
   * read), told at the level it deserves, counted and heard (`onDelivery`).
   * `bodyBytes`: what was read of its body; `headers`: the request's, for hints.
   */
  refuse(err: unknown, started?: number, bodyBytes = 0, headers?: HeadersInput): ReceiverAnswer {
    this.config.telemetry.instant(
      'jobhook.receive',
      'server',
      SPAN_ADAPTER.get(this.config.adapter),
      codeOf(err),
    );
    return this.refusal(err, started, bodyBytes, headers);
  }

  /** A refusal inside the delivery's span. */
  private failed(
    span: SpanLike | undefined,
    err: unknown,
    started: number,
    bodyBytes: number,
    headers: HeadersInput,
  ): ReceiverAnswer {
    fail(span, err);
    return this.refusal(err, started, bodyBytes, headers);
  }

  private refusal(
    err: unknown,
    started: number | undefined,
    bodyBytes: number,
    headers?: HeadersInput,
  ): ReceiverAnswer {
    if (isWebhookError(err) && err.code === 'BODY_UNAVAILABLE') this.config.runner.report('body', err);
    else this.diagnosis.refused(err);
    const answer = answerForError(err);
    const code = codeOf(err);
    return this.delivered(answer, { outcome: outcomeOf(answer.status, code), code, started, bodyBytes });
  }

  /** Counts a delivery (`jobhook.deliveries`), tells `onDelivery`, and gives the answer back. */
  private delivered(answer: ReceiverAnswer, d: Told): ReceiverAnswer {
    const { telemetry, onDelivery, log } = this.config;
    if (telemetry.deliveries !== undefined)
      telemetry.deliveries.add(1, this.deliveries.get(d.outcome, d.code, d.dialect));
    if (onDelivery === undefined) return answer;
    const outcome: DeliveryOutcome = {
      status: answer.status,
      outcome: d.outcome,
      ...(d.code === undefined ? {} : { code: d.code }),
      ...(d.jobId === undefined ? {} : { jobId: d.jobId }),
      ...(d.dialect === undefined ? {} : { dialect: d.dialect }),
      durationMs: d.started === undefined ? 0 : Math.round((performance.now() - d.started) * 1000) / 1000,
      bodyBytes: d.bodyBytes,
    };
    try {
      onDelivery(outcome);
    } catch (err) {
      log.error('jobhook: onDelivery threw', errorDetails(err));
    }
    return answer;
  }
}
