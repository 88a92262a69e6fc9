import type { JsonValue } from './canonical/to-value.js';
import { PayloadInvalidError } from './errors.js';
import { jobIdProblem } from './protocol.js';

/** A JSON object as jobhook hands it over. */
export interface JsonObjectValue {
  [key: string]: JsonValue;
}

/**
 * Fields every `async_job_completed` delivery has. The gateway may add fields: they
 * are kept on the object, and reachable typed as `JsonValue` through the delivery's
 * `payload` (the same object seen as a JSON object), so a typo such as
 * `event.outptu` does not compile.
 */
export interface JobEventBase {
  event: 'async_job_completed';
  /** The gateway's job id (a UUID string); the idempotency key. */
  job_id: string;
  feature?: string;
  subfeature?: string;
  provider?: string;
  model?: string | null;
  /** ISO 8601. */
  created_at?: string;
  /** ISO 8601; checked against the replay window (`maxAgeSeconds`). */
  finished_at?: string;
  /** The provider's raw answer, only when the caller asked for it. */
  original_response?: JsonValue;
  /** Echo of the caller's `user_webhook_parameters`. */
  user_parameters?: JsonObjectValue;
}

/** A job that succeeded: `output` holds the result. */
export interface JobSucceededEvent extends JobEventBase {
  status: 'success';
  output: JsonObjectValue;
}

/** A job that failed: `error.message` says why. */
export interface JobFailedEvent extends JobEventBase {
  status: 'fail';
  error: { message: string } & JsonObjectValue;
}

/** The verified payload, discriminated on `status`: narrow it before reading `output` or `error`. */
export type JobCompletedEvent = JobSucceededEvent | JobFailedEvent;

function isObject(v: unknown): v is JsonObjectValue {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function invalid(what: string): never {
  throw new PayloadInvalidError(`The signature is valid but the payload is not an async_job_completed event jobhook can hand over: ${what}.`);
}

/** Runtime check of a verified payload; returns it typed or throws PayloadInvalidError. */
export function validateEvent(value: JsonValue): JobCompletedEvent {
  if (!isObject(value)) invalid('the body is not a JSON object');
  const problem = jobIdProblem(value.job_id);
  if (problem !== undefined) invalid(value.job_id === undefined ? 'job_id is missing' : problem);
  if (value.event !== 'async_job_completed') invalid(`event is ${JSON.stringify(value.event ?? null)}, expected "async_job_completed"`);
  if (value.status === 'success') {
    if (!isObject(value.output)) invalid('status is "success" but output is not an object');
  } else if (value.status === 'fail') {
    if (!isObject(value.error) || typeof value.error.message !== 'string') invalid('status is "fail" but error.message is not a string');
  } else {
    invalid(`status is ${JSON.stringify(value.status ?? null)}, expected "success" or "fail"`);
  }
  for (const field of ['feature', 'subfeature', 'provider', 'created_at', 'finished_at'] as const) {
    if (value[field] !== undefined && typeof value[field] !== 'string') invalid(`${field} is not a string`);
  }
  if (value.model !== undefined && value.model !== null && typeof value.model !== 'string') invalid('model is not a string or null');
  if (value.user_parameters !== undefined && !isObject(value.user_parameters)) invalid('user_parameters is not an object');
  return value as unknown as JobCompletedEvent;
}
