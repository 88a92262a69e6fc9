/** The options of a check, checked and resolved once into a frozen record. */
import type { KeyObject } from 'node:crypto';
import { DIALECTS, type DialectName, DEFAULT_MAX_AGE_SECONDS } from '../../index.js';
import {
  assertDialect,
  option,
  optionError,
  checkNumber,
  checkOptionNames,
  optionalNumber,
  type OptionNamesOf,
  HEADER_NAME_OPTIONS,
  type HeaderNameOptions,
} from '../../lib/entries/tools-door.js';
import { resolveHeaderNames } from '../deliveries/header-names.js';
import { privateKeyOption } from '../deliveries/keys.js';
import { checkTarget } from '../deliveries/send.js';
import { SENT_ENCODINGS, type SentEncoding } from '../deliveries/variants.js';
import { newSeed } from './random.js';
import type { CheckAttempt } from './types.js';

/** Where the receiver shows what it ran: a URL answering the job ids it processed, or a function returning them. */
export type EffectsSource = string | URL | (() => Iterable<string> | Promise<Iterable<string>>);

/** A check's options; the header names (`signatureHeader`, …) for a vendor prefix. */
export interface CheckOptions extends HeaderNameOptions {
  /** RSA private key (PEM or KeyObject) whose public key the receiver trusts: a TEST-ONLY pair from `jobhook keygen`. */
  privateKey: string | KeyObject;
  /**
   * What the receiver ran, one job id per run of its handler (a job run twice is listed
   * twice): a URL answering a JSON array of job ids (or one id per line), or a function.
   * Without it, "ran twice" and "lost" are read from the answers only.
   */
  effects?: EffectsSource;
  /** How long to wait for the effects of accepted deliveries to show (default 5,000 ms). */
  effectsWaitMs?: number;
  /** Sizes of the large genuine deliveries, in bytes (default 1 kB, 150 kB, 1.5 MB, 7 MB and 25 MB). */
  sizes?: readonly number[];
  /** Dialects of the genuine deliveries with generated values (default all four). */
  dialects?: readonly DialectName[];
  /** Content-Encodings to try, when the receiver accepts them (default gzip and br; `[]` for none). */
  encodings?: readonly SentEncoding[];
  /** Retries after the first attempt (default 3, as the gateway). */
  retries?: number;
  /** Per-attempt timeout (default 30,000 ms, as the gateway): a slower answer is retried. */
  timeoutMs?: number;
  /** First backoff, doubled after each attempt (default 1,000 ms). */
  backoffMs?: number;
  /** Backoff cap (default 30,000 ms). */
  maxBackoffMs?: number;
  /** The receiver's replay window: the "too old" delivery finished an hour before it (default 24 h). */
  maxAgeSeconds?: number;
  /** The whole check stops after this long; deliveries not sent by then are reported as not run (default 300,000 ms). */
  timeLimitMs?: number;
  /** Seed of the generated values (default a random one; the report gives it, to run the same values again). */
  seed?: number;
  /** Allow plain http:// to a host that is not loopback. */
  allowInsecure?: boolean;
  /** Cancels the check: what was not sent is reported as not run. */
  signal?: AbortSignal;
  /** Told of each attempt as it ends: the check's progress (`jobhook check` prints it on stderr). */
  onAttempt?: (attempt: CheckAttempt) => void;
}

/** The names of {@link CheckOptions}. */
export const CHECK_OPTIONS = {
  privateKey: true,
  effects: true,
  effectsWaitMs: true,
  sizes: true,
  dialects: true,
  encodings: true,
  retries: true,
  timeoutMs: true,
  backoffMs: true,
  maxBackoffMs: true,
  maxAgeSeconds: true,
  timeLimitMs: true,
  seed: true,
  ...HEADER_NAME_OPTIONS,
  allowInsecure: true,
  signal: true,
  onAttempt: true,
} as const satisfies OptionNamesOf<CheckOptions>;

export const DEFAULT_SIZES: readonly number[] = [1_000, 150_000, 1_500_000, 7_000_000, 25_000_000];
/** Sizes accepted: a kilobyte to 100 MB, at most 12 of them (a check stays bounded). */
export const MIN_SIZE = 1_000;
export const MAX_SIZE = 100_000_000;
export const MAX_SIZES = 12;

/** The gateway's delivery policy as the check applies it. */
export interface RetryPolicy {
  retries: number;
  timeoutMs: number;
  backoffMs: number;
  maxBackoffMs: number;
}

export interface CheckSettings {
  url: URL;
  key: KeyObject;
  effects: EffectsSource | undefined;
  effectsWaitMs: number;
  sizes: readonly number[];
  dialects: readonly DialectName[];
  encodings: readonly SentEncoding[];
  policy: RetryPolicy;
  maxAgeSeconds: number;
  timeLimitMs: number;
  seed: number;
  headers: Readonly<Required<HeaderNameOptions>>;
  allowInsecure: boolean;
  signal: AbortSignal | undefined;
  onAttempt: ((attempt: CheckAttempt) => void) | undefined;
}

function sizes(value: readonly number[] | undefined): readonly number[] {
  if (value === undefined) return DEFAULT_SIZES;
  if (!Array.isArray(value) || value.length > MAX_SIZES)
    throw optionError`${option('sizes')} must be an array of at most ${MAX_SIZES} sizes in bytes`;
  return [
    ...new Set(value.map((s) => checkNumber(s, 'sizes', { min: MIN_SIZE, max: MAX_SIZE, integer: true }))),
  ].sort((a, b) => a - b);
}

function list<T extends string>(
  value: readonly T[] | undefined,
  name: string,
  known: readonly T[],
  fallback: readonly T[],
): readonly T[] {
  if (value === undefined) return fallback;
  if (!Array.isArray(value) || value.some((v) => !known.includes(v)))
    throw optionError`${option(name)} must be an array of ${known.join(', ')}`;
  return [...new Set(value)];
}

function effects(value: EffectsSource | undefined, allowInsecure: boolean): EffectsSource | undefined {
  if (value === undefined || typeof value === 'function') return value;
  if (typeof value !== 'string' && !(value instanceof URL))
    throw optionError`${option('effects')} must be a URL or a function`;
  checkTarget(String(value), allowInsecure, 'effects');
  return String(value);
}

function callback<F extends (...args: never[]) => unknown>(
  value: F | undefined,
  name: string,
): F | undefined {
  if (value !== undefined && typeof value !== 'function')
    throw optionError`${option(name)} must be a function`;
  return value;
}

/** Checks the options and resolves them once. */
export function resolveCheckOptions(url: string, options: CheckOptions): CheckSettings {
  checkOptionNames(options, CHECK_OPTIONS);
  if (typeof options !== 'object' || options === null)
    throw optionError`${option('options')} must be an object with privateKey`;
  const allowInsecure = options.allowInsecure === true;
  const ms = (value: number | undefined, name: string, fallback: number, min = 0) =>
    optionalNumber(value, name, fallback, { min, integer: true, max: 2 ** 31 - 1 });
  const dialects =
    options.dialects === undefined ? DIALECTS : options.dialects.map((d) => assertDialect(d, 'dialects'));
  return Object.freeze({
    url: checkTarget(url, allowInsecure),
    key: privateKeyOption(options.privateKey),
    effects: effects(options.effects, allowInsecure),
    effectsWaitMs: ms(options.effectsWaitMs, 'effectsWaitMs', 5_000),
    sizes: sizes(options.sizes),
    dialects: [...new Set(dialects)],
    encodings: list(options.encodings, 'encodings', SENT_ENCODINGS, SENT_ENCODINGS),
    policy: {
      retries: optionalNumber(options.retries, 'retries', 3, { min: 0, max: 10, integer: true }),
      timeoutMs: ms(options.timeoutMs, 'timeoutMs', 30_000, 1),
      backoffMs: ms(options.backoffMs, 'backoffMs', 1_000),
      maxBackoffMs: ms(options.maxBackoffMs, 'maxBackoffMs', 30_000),
    },
    maxAgeSeconds: optionalNumber(options.maxAgeSeconds, 'maxAgeSeconds', DEFAULT_MAX_AGE_SECONDS, {
      integer: true,
    }),
    timeLimitMs: ms(options.timeLimitMs, 'timeLimitMs', 300_000, 1),
    seed: optionalNumber(options.seed, 'seed', newSeed(), { min: 0, max: 2 ** 32 - 1, integer: true }),
    headers: resolveHeaderNames(options),
    allowInsecure,
    signal: options.signal,
    onAttempt: callback(options.onAttempt, 'onAttempt'),
  });
}
