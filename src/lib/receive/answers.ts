import { isWebhookError, type WebhookErrorCode } from '../errors.js';
import { STATUS_BY_CODE } from '../protocol.js';

/** Codes that appear in error bodies besides the WebhookError codes. */
export type ReceiverErrorCode = WebhookErrorCode | 'IN_PROGRESS' | 'HANDLER_FAILED' | 'INTERNAL_ERROR';

/** An HTTP answer, independent of the framework that sends it. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: { status: 'processed' | 'duplicate' | 'verified'; job_id: string } | { error: { code: ReceiverErrorCode; message: string } };
}

export { STATUS_BY_CODE };

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

export function errorAnswer(status: number, code: ReceiverErrorCode, message: string, headers: Record<string, string> = {}): HttpAnswer {
  return { status, headers: { ...JSON_HEADERS, ...headers }, body: { error: { code, message } } };
}

export function okAnswer(status: 'processed' | 'duplicate' | 'verified', jobId: string): HttpAnswer {
  return { status: 200, headers: { ...JSON_HEADERS }, body: { status, job_id: jobId } };
}

/**
 * The answer for an error thrown while receiving. Only jobhook's own messages are
 * echoed (they never hold key material); anything else becomes a generic 500.
 */
export function answerForError(err: unknown): HttpAnswer {
  if (isWebhookError(err)) {
    const status = STATUS_BY_CODE[err.code];
    const headers: Record<string, string> = err.code === 'BODY_TOO_LARGE' ? { connection: 'close' } : {};
    return errorAnswer(status, err.code, err.message, headers);
  }
  return errorAnswer(500, 'INTERNAL_ERROR', 'The receiver failed unexpectedly; see the server logs.');
}
