import type { JsonObjectValue } from '../event.js';
import { checkMs, optionalNumber } from '../options.js';
import { jobIdProblem } from '../protocol.js';

/** What a claim on a job id found. */
export type ClaimResult =
  /** This caller owns the job until the lease ends; pass `token` to renew, complete or release. */
  | { status: 'acquired'; token: string }
  /**
   * Another caller holds the job: `retryAfterMs` is the time left on its lease when
   * known. `stale`: that lease ran out but the job is not free yet (see
   * `ClaimOptions.takeoverGraceMs`); a claim `retryAfterMs` from now takes it over,
   * unless its holder renews, completes or releases it first.
   */
  | { status: 'in_progress'; retryAfterMs?: number; stale?: boolean }
  /** The job was completed within the retention window. */
  | { status: 'completed' };

export interface ClaimOptions {
  /** How long the claim holds unless renewed, before another delivery may take the job over (a crashed worker). */
  leaseMs: number;
  /**
   * The owner token to claim with (default: a fresh random one). Choosing it lets a
   * caller whose claim got no reply (a timeout, a dropped connection) release it by
   * token, or claim again with it: a claim by the token that holds the job is acquired
   * again, with a fresh lease.
   */
  token?: string;
  /**
   * When another token's lease has run out, how long to wait before taking the job
   * over, counted from the first claim that finds it so (default 0: at once). Until
   * then claims get `in_progress` with `stale: true`, and the holder can still renew
   * or complete it. A live holder cut off from the store for longer than its lease (a
   * store outage or pause, a network partition) gets this long, once the store answers
   * again, to record the completion it holds, so its job is not run a second time; a
   * crashed holder's job is free this much later. Stores that do not know the option
   * take over at once.
   */
  takeoverGraceMs?: number;
}

export interface RenewOptions {
  /** The new lease, from now. */
  leaseMs: number;
}

export interface CompleteOptions {
  /** How long the completed mark is kept, so later retries are answered as duplicates. */
  retainMs: number;
}

/**
 * The idempotency contract, keyed by the gateway's `job_id`. Every method rejects with
 * `StoreUnavailableError` when the backend fails, and with a `TypeError` for a job id
 * it could not keep apart from others.
 *
 * A token owns a job from `claim` until `complete` or `release`, or until its lease
 * runs out and another token claims the job (after `takeoverGraceMs`, counted from the
 * first claim that found the lease over). "Nobody else holds it" is enough for the
 * owner's `renew` and `complete` to succeed even after its lease ran out: the work was
 * done or is still going on, and no one else started it.
 */
export interface IdempotencyStore {
  claim(jobId: string, options: ClaimOptions): Promise<ClaimResult>;
  /**
   * Extends the lease while the handler runs. Resolves false (changing nothing) when
   * another token holds the job or it was completed: the claim was lost.
   */
  renew?(jobId: string, token: string, options: RenewOptions): Promise<boolean>;
  /**
   * Marks the job completed. Resolves true unless another token holds a live claim on
   * it (then nothing changes and false tells the caller the job may run twice).
   * Completing a completed job is a success.
   */
  complete(jobId: string, token: string, options: CompleteOptions): Promise<boolean>;
  /** Gives the claim up so a retry can process the job. Resolves false when `token` did not hold it. */
  release(jobId: string, token: string): Promise<boolean>;
  /**
   * Records a job created at the gateway whose completion has not been processed yet,
   * for the reconciler to poll if its webhook never comes. `complete()` removes it.
   */
  trackPending?(jobId: string, options?: TrackPendingOptions): Promise<void>;
  /** Pending jobs recorded at or before `before`, oldest first. */
  listPending?(options: ListPendingOptions): Promise<PendingJob[]>;
  /** Removes a pending record (the gateway forgot the job, or it is done). */
  forgetPending?(jobId: string): Promise<void>;
  /**
   * Moves a pending record's `since` to `options.since` (nothing if the job is not
   * pending): the reconciler sends a job it polled back behind the others, so jobs
   * that stay unfinished cannot keep the rest from being polled.
   */
  deferPending?(jobId: string, options: DeferPendingOptions): Promise<void>;
}

export interface DeferPendingOptions {
  /** The record's new `since`, epoch ms. */
  since: number;
}

/** A job recorded as pending. */
export interface PendingJob {
  jobId: string;
  /** When it was recorded (or created), epoch ms; moved later each time the reconciler polls it and it is not done. */
  since: number;
  /** The `user_webhook_parameters` it was created with, for the event the reconciler builds. */
  userParameters?: JsonObjectValue;
}

export interface TrackPendingOptions {
  /** When the job was created, epoch ms (default now). */
  since?: number;
  /** The job's `user_webhook_parameters` (the gateway's job resource does not echo them). */
  userParameters?: JsonObjectValue;
}

export interface ListPendingOptions {
  /** Only jobs recorded at or before this time, epoch ms. */
  before: number;
  /** At most this many (default 100). */
  limit?: number;
}

/** The stores that track pending jobs (all of jobhook's do). */
export type PendingStore = IdempotencyStore & Required<Pick<IdempotencyStore, 'trackPending' | 'listPending' | 'forgetPending' | 'deferPending'>>;

/** The `since` of a pending record: a finite epoch ms, now by default. */
function checkSince(since: unknown, what = 'since'): number {
  if (since === undefined) return Date.now();
  if (typeof since !== 'number' || !Number.isFinite(since)) throw new TypeError(`${what} must be epoch milliseconds; got ${String(since)}`);
  return Math.floor(since);
}

/** `userParameters` as a JSON object, or undefined. */
function checkUserParameters(value: unknown): JsonObjectValue | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError('userParameters must be a JSON object');
  return value as JsonObjectValue;
}

/*
 * The arguments of each store operation, checked the same way by every store
 * (TypeError for a mistake): the stores differ only in how they keep things.
 */

export function claimArgs(jobId: unknown, options: ClaimOptions): { leaseMs: number; token: string; graceMs: number } {
  checkJobId(jobId);
  return {
    leaseMs: checkMs(options?.leaseMs, 'leaseMs'),
    token: options.token === undefined ? newToken() : checkToken(options.token),
    graceMs: checkGraceMs(options.takeoverGraceMs, 0),
  };
}

/**
 * How long the shared stores keep a claim past its lease (Redis: the key's life; a
 * marked claim's grace gets as much again; PostgreSQL: what `purgeExpired()` spares),
 * so a takeover grace can still start after a store outage up to this long.
 */
export const LAPSED_CLAIM_KEEP_MS = 60_000;

/** A `takeoverGraceMs` option: whole milliseconds (fractions rounded up), 0 allowed; `fallback` when undefined. */
export function checkGraceMs(value: unknown, fallback: number): number {
  return Math.ceil(optionalNumber(value, 'takeoverGraceMs', fallback, { min: 0 }));
}

export function renewArgs(jobId: unknown, token: unknown, options: RenewOptions): { leaseMs: number } {
  checkJobId(jobId);
  checkToken(token);
  return { leaseMs: checkMs(options?.leaseMs, 'leaseMs') };
}

export function completeArgs(jobId: unknown, token: unknown, options: CompleteOptions): { retainMs: number } {
  checkJobId(jobId);
  checkToken(token);
  return { retainMs: checkMs(options?.retainMs, 'retainMs') };
}

export function releaseArgs(jobId: unknown, token: unknown): void {
  checkJobId(jobId);
  checkToken(token);
}

export function trackArgs(jobId: unknown, options: TrackPendingOptions | undefined): { since: number; userParameters: JsonObjectValue | undefined } {
  checkJobId(jobId);
  return { since: checkSince(options?.since), userParameters: checkUserParameters(options?.userParameters) };
}

export function deferArgs(jobId: unknown, options: DeferPendingOptions): { since: number } {
  checkJobId(jobId);
  if (options?.since === undefined) throw new TypeError('options.since is required: the epoch ms the pending record moves to');
  return { since: checkSince(options.since) };
}

export function listArgs(options: ListPendingOptions): { before: number; limit: number } {
  return { before: checkSince(options?.before, 'before'), limit: optionalNumber(options?.limit, 'limit', 100, { integer: true }) };
}

/**
 * The job id when a store can keep it apart from every other id (see `jobIdProblem`:
 * 1–256 characters of well-formed Unicode without control characters), else a TypeError.
 */
export function checkJobId(jobId: unknown): string {
  const problem = jobIdProblem(jobId);
  if (problem !== undefined) throw new TypeError(`jobId is not usable as an idempotency key: ${problem}`);
  return jobId as string;
}

const TOKEN = /^[A-Za-z0-9_-]{8,128}$/;

/** An owner token: 8–128 characters of letters, digits, `-` and `_` (a UUID fits). */
export function checkToken(token: unknown, what = 'token'): string {
  if (typeof token !== 'string' || !TOKEN.test(token)) throw new TypeError(`${what} must be 8–128 characters of letters, digits, - and _; got ${JSON.stringify(token)}`);
  return token;
}

/** A fresh owner token. */
export function newToken(): string {
  return globalThis.crypto.randomUUID();
}
