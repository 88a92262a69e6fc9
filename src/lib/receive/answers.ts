import { isWebhookError, type WebhookErrorCode } from '../base/errors.js';
import { STATUS_BY_CODE } from '../base/errors.js';
import type { RunResult } from '../jobs/runner.js';
import { utf8ByteLength } from '../core/canonical/utf8.js';
import { BUSY_RETRY_AFTER_SECONDS } from './guard.js';

/** Codes that appear in error bodies besides the WebhookError codes. */
export type ReceiverErrorCode = WebhookErrorCode | 'IN_PROGRESS' | 'HANDLER_FAILED' | 'INTERNAL_ERROR';

/** The JSON of an answer's body. */
export type ReceiverAnswerBody =
  | { status: 'processed' | 'duplicate'; job_id: string }
  | { error: { code: ReceiverErrorCode; message: string } };

/** An HTTP answer, independent of the framework that sends it. `body` is JSON text. */
export interface ReceiverAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * What a 5xx says: the code and a generic message. The gateway retries it either way;
 * backend details (addresses, database messages) go to the log, never to the sender.
 */
const GENERIC_5XX: Partial<Record<ReceiverErrorCode, string>> = {
  STORE_UNAVAILABLE: 'The idempotency store is unavailable; retry later.',
  RECEIVER_BUSY: 'The receiver is busy with other deliveries; retry later.',
  BODY_UNAVAILABLE: 'The receiver is misconfigured and cannot read the raw body; see its logs.',
  HANDLER_FAILED: 'The handler failed; the job was released so a retry can process it.',
  CLAIM_LOST:
    'This receiver lost its claim on the job before its work was committed; nothing was applied. Retry later.',
  INTERNAL_ERROR: 'The receiver failed unexpectedly; see its logs.',
};

/**
 * An answer of JSON `text`, its headers a fresh object (an adapter may add to them) with
 * the Content-Length, so that it goes out in one write and never chunked, whoever writes it.
 */
function jsonAnswer(status: number, text: string, headers?: Record<string, string>): ReceiverAnswer {
  const all: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'content-length': String(utf8ByteLength(text, text.length)),
  };
  if (headers !== undefined) Object.assign(all, headers);
  return { status, headers: all, body: text };
}

function answer(status: number, body: ReceiverAnswerBody, headers?: Record<string, string>): ReceiverAnswer {
  return jsonAnswer(status, JSON.stringify(body), headers);
}

export function errorAnswer(
  status: number,
  code: ReceiverErrorCode,
  message: string,
  headers?: Record<string, string>,
): ReceiverAnswer {
  return answer(
    status,
    { error: { code, message: status >= 500 ? (GENERIC_5XX[code] ?? message) : message } },
    headers,
  );
}

/**
 * The answer for an error thrown while receiving. jobhook's 4xx messages are echoed
 * (they never hold key material or backend details); anything else is a generic 500.
 */
export function answerForError(err: unknown): ReceiverAnswer {
  if (!isWebhookError(err)) return errorAnswer(500, 'INTERNAL_ERROR', '');
  const status = STATUS_BY_CODE[err.code];
  // The rest of an oversized or stalled body is not read: close the connection after the answer.
  const headers: Record<string, string> =
    err.code === 'BODY_TOO_LARGE' || err.code === 'BODY_TIMEOUT' ? { connection: 'close' } : {};
  if (err.code === 'RECEIVER_BUSY') headers['retry-after'] = String(BUSY_RETRY_AFTER_SECONDS);
  return errorAnswer(status, err.code, err.message, headers);
}

/** The answer for the outcome of running a verified job. */
export function answerForRun(
  result: RunResult,
  jobId: string,
  retryAfterSeconds: number | undefined,
): ReceiverAnswer {
  switch (result.kind) {
    case 'processed':
      // The same text as JSON.stringify({ status, job_id }), without the object.
      return jsonAnswer(200, `{"status":"processed","job_id":${JSON.stringify(jobId)}}`);
    case 'duplicate':
      return jsonAnswer(200, `{"status":"duplicate","job_id":${JSON.stringify(jobId)}}`);
    case 'in_progress': {
      const seconds =
        retryAfterSeconds ?? Math.min(30, Math.max(1, Math.ceil((result.retryAfterMs ?? 5000) / 1000)));
      // 503, not 409: a 4xx would end the gateway's retries while the job might still fail.
      return errorAnswer(
        503,
        'IN_PROGRESS',
        `Job ${jobId} is being processed by another delivery; retry later.`,
        { 'retry-after': String(seconds) },
      );
    }
    case 'handler_failed':
      return errorAnswer(500, 'HANDLER_FAILED', '');
    case 'store_unavailable':
      return errorAnswer(503, 'STORE_UNAVAILABLE', '');
    case 'claim_lost':
      // Nothing of the handler's transaction was applied: the gateway's retry processes the job.
      return errorAnswer(503, 'CLAIM_LOST', '', {
        'retry-after': String(
          retryAfterSeconds ?? Math.min(30, Math.max(1, Math.ceil(result.retryAfterMs / 1000))),
        ),
      });
  }
}
