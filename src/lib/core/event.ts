import type { JsonValue } from './canonical/to-value.js';
import { PayloadInvalidError } from '../base/errors.js';
import { jobIdProblem } from '../base/protocol.js';

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
  /** RFC 3339 (e.g. `2026-11-21T10:00:05Z`). */
  created_at?: string;
  /** RFC 3339; checked against the replay window (`maxAgeSeconds`, `maxFutureSkewSeconds`). */
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

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 date-time (`2026-11-21T10:00:05Z`, `…05.123456+02:00`; `t`, `z` and a space
 * for `T` accepted, as RFC 3339 allows) as epoch ms; undefined for anything else,
 * including the looser forms `Date.parse` takes (a date alone, no offset, other layouts),
 * whose meaning depends on the machine reading them. A leap second (`:60`) reads as the
 * end of the minute before it.
 */
export function parseRfc3339(text: unknown): number | undefined {
  if (typeof text !== 'string') return undefined;
  const m = RFC3339.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((k) => Number(m[k]));
  const days = new Date(Date.UTC(2000, month!, 0)).getUTCDate() - (month === 2 && !leap(year!) ? 1 : 0);
  if (month! < 1 || month! > 12 || day! < 1 || day! > days || hour! > 23 || minute! > 59 || second! > 60) return undefined;
  let offset = 0;
  if (m[8] === undefined) {
    const [oh, om] = [Number(m[10]), Number(m[11])];
    if (oh > 23 || om > 59) return undefined;
    offset = (m[9] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  const date = new Date(0);
  date.setUTCFullYear(year!, month! - 1, day!);
  date.setUTCHours(hour!, minute!, Math.min(second!, 59), 0);
  const fraction = m[7] === undefined ? 0 : Number(`0${m[7]}`) * 1000;
  return date.getTime() + (second === 60 ? 999.999 : fraction) - offset;
}

function leap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}
