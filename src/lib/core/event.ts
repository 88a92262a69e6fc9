import type { JsonValue } from './canonical/to-value.js';
import { PayloadInvalidError } from '../base/errors.js';
import { jobIdProblem } from '../base/protocol.js';
import { cut, escapeControls } from '../base/text.js';

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

/** A value from the body as a message shows it: its JSON, cut and escaped. */
const shown = (value: unknown) => escapeControls(cut(JSON.stringify(value ?? null), 60));

function invalid(what: string): never {
  throw new PayloadInvalidError(
    `The signature is valid but the payload is not an async_job_completed event jobhook can hand over: ${what}.`,
  );
}

/** Runtime check of a verified payload; returns it typed or throws PayloadInvalidError. */
export function validateEvent(value: JsonValue): JobCompletedEvent {
  if (!isObject(value)) invalid('the body is not a JSON object');
  const problem = jobIdProblem(value.job_id);
  if (problem !== undefined) invalid(value.job_id === undefined ? 'job_id is missing' : problem);
  if (value.event !== 'async_job_completed')
    invalid(`event is ${shown(value.event)}, expected "async_job_completed"`);
  if (value.status === 'success') {
    if (!isObject(value.output)) invalid('status is "success" but output is not an object');
  } else if (value.status === 'fail') {
    if (!isObject(value.error) || typeof value.error.message !== 'string')
      invalid('status is "fail" but error.message is not a string');
  } else {
    invalid(`status is ${shown(value.status)}, expected "success" or "fail"`);
  }
  for (const field of ['feature', 'subfeature', 'provider', 'created_at', 'finished_at'] as const) {
    if (value[field] !== undefined && typeof value[field] !== 'string') invalid(`${field} is not a string`);
  }
  if (value.model !== undefined && value.model !== null && typeof value.model !== 'string')
    invalid('model is not a string or null');
  if (value.user_parameters !== undefined && !isObject(value.user_parameters))
    invalid('user_parameters is not an object');
  return value as unknown as JobCompletedEvent;
}

/**
 * An RFC 3339 date-time (`2026-11-21T10:00:05Z`, `…05.123456+02:00`; `t`, `z` and a space
 * for `T` accepted, as RFC 3339 allows) as epoch ms; undefined for anything else,
 * including the looser forms `Date.parse` takes (a date alone, no offset, other layouts),
 * whose meaning depends on the machine reading them. A leap second (`:60`) reads as the
 * end of the minute before it. Read character by character (it runs on every delivery:
 * no regular expression, no Date object for the usual four-digit year).
 */
export function parseRfc3339(text: unknown): number | undefined {
  if (typeof text !== 'string' || text.length < 20) return undefined;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  const t = text.charCodeAt(10);
  if (
    text.charCodeAt(4) !== 0x2d ||
    text.charCodeAt(7) !== 0x2d ||
    (t !== 0x54 && t !== 0x74 && t !== 0x20) ||
    text.charCodeAt(13) !== 0x3a ||
    text.charCodeAt(16) !== 0x3a
  )
    return undefined;
  if (
    year < 0 ||
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysIn(year, month) ||
    hour < 0 ||
    hour > 23 ||
    minute < 0 ||
    minute > 59 ||
    second < 0 ||
    second > 60
  )
    return undefined;
  let at = 19;
  let fraction = 0;
  if (text.charCodeAt(at) === 0x2e) {
    const start = at + 1;
    for (at = start; at < text.length && isDigit(text.charCodeAt(at)); at++);
    if (at === start) return undefined;
    fraction = Number(`0.${text.slice(start, at)}`) * 1000;
  }
  const offset = offsetMs(text, at);
  if (offset === undefined) return undefined;
  const time = utc(year, month, day, hour, minute, Math.min(second, 59));
  return time + (second === 60 ? 999.999 : fraction) - offset;
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

/** The value of `n` decimal digits at `at`, or -1. */
function digits(text: string, at: number, n: number): number {
  let v = 0;
  for (let i = at; i < at + n; i++) {
    const c = text.charCodeAt(i);
    if (!isDigit(c)) return -1;
    v = v * 10 + (c - 0x30);
  }
  return v;
}

/** The offset that ends the text at `at` (`Z`, `z`, `±HH:MM`), in ms to subtract; undefined for anything else. */
function offsetMs(text: string, at: number): number | undefined {
  const c = text.charCodeAt(at);
  if (c === 0x5a || c === 0x7a) return at + 1 === text.length ? 0 : undefined;
  if ((c !== 0x2b && c !== 0x2d) || at + 6 !== text.length || text.charCodeAt(at + 3) !== 0x3a)
    return undefined;
  const oh = digits(text, at + 1, 2);
  const om = digits(text, at + 4, 2);
  if (oh < 0 || oh > 23 || om < 0 || om > 59) return undefined;
  return (c === 0x2d ? -1 : 1) * (oh * 60 + om) * 60_000;
}

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysIn(year: number, month: number): number {
  return month === 2 && leap(year) ? 29 : DAYS[month - 1]!;
}

/** Epoch ms of a UTC date and time (years below 100 too: Date.UTC would read them as 19xx). */
function utc(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  if (year >= 100) return Date.UTC(year, month - 1, day, hour, minute, second);
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  return date.getTime();
}

function leap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}
