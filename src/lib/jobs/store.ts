import type { JsonObjectValue } from '../core/event.js';
import { checkMs, optionalNumber } from '../base/options.js';
import { jobIdProblem } from '../base/protocol.js';
import type { CompleteReply, RenewReply } from './model.js';

export type { CompleteReply, RenewReply } from './model.js';

/** What a claim on a job id found. */
export type ClaimResult =
  /**
   * This caller owns the job until the lease ends; pass `token` to renew, complete or
   * release. `fence`: the claim's fencing number, larger for every later holder of the
   * job (for conditional writes downstream). `tookOver`: the job was taken from another
   * holder whose lease lapsed, which may have applied its effect (it may run twice); also
   * when the claim was made again by its token (its first reply was lost), or after a
   * release of such a claim.
   */
  | { status: 'acquired'; token: string; fence: number; tookOver?: boolean }
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
  /** The claim's fencing number, kept should the store have dropped the record meanwhile. */
  fence?: number;
}

export interface ReleaseOptions {
  /**
   * The holder may have applied an effect that the next holder repeats: its handler
   * finished, but what it wrote in the store's transaction was rolled back, while what it
   * did outside that transaction happened. The next claim is then a takeover
   * (`tookOver`), reported as a job that may have run twice.
   */
  tainted?: boolean;
}

export interface CompleteOptions {
  /** How long the completed mark is kept, so later retries are answered as duplicates. */
  retainMs: number;
  /** The claim's fencing number, recorded with the completion. */
  fence?: number;
}

/**
 * The idempotency contract, keyed by the gateway's `job_id`: the claim protocol of
 * `src/lib/jobs/model.ts` (`transition`), which every store implements. Every method
 * rejects with `StoreUnavailableError` when the backend fails, and with a `TypeError`
 * for a job id it could not keep apart from others.
 *
 * A token owns a job from `claim` until `complete` or `release`, or until its lease
 * runs out and another token claims the job (after `takeoverGraceMs`, counted from the
 * first claim that found the lease over). Until someone else takes it over, the owner's
 * `renew` and `complete` succeed even after its lease ran out: the work was done or is
 * still going on, and no one else started it. Once another token took it over, they
 * answer `superseded`: the job may have run twice.
 */
export interface IdempotencyStore {
  claim(jobId: string, options: ClaimOptions): Promise<ClaimResult>;
  /**
   * Extends the lease while the handler runs: `renewed`; `superseded` (changing
   * nothing) when another token holds the job or completed it: the claim was lost;
   * `completed` when this token completed it. (Stores written for earlier versions
   * answer true or false, read as `renewed` or `superseded`.)
   */
  renew?(jobId: string, token: string, options: RenewOptions): Promise<RenewReply | boolean>;
  /**
   * Marks the job completed by `token`: `completed`, also when this token completed it
   * before (a retried completion). `superseded` when another token took the job over or
   * completed it, or this token's claim was released: the job may have run twice (the
   * store still records it as done when nobody holds it: the token that took it over has
   * lapsed as well, or released it); a superseded completion retried is `superseded` again. (Stores written for earlier
   * versions answer true or false, read as `completed` or `superseded`.)
   */
  complete(jobId: string, token: string, options: CompleteOptions): Promise<CompleteReply | boolean>;
  /**
   * Gives the claim up so a retry can process the job. Resolves false when `token` did not
   * hold it. jobhook's stores remember the release for a while: a late renewal or completion
   * of that token is answered `superseded`, and the next claim is `tookOver` when the
   * released claim had taken the job over, or `options.tainted` says its holder may have
   * applied an effect the next one repeats.
   */
  release(jobId: string, token: string, options?: ReleaseOptions): Promise<boolean>;
  /** Resolves when the backend answers (readiness probes: `receiver.health()`); rejects otherwise. */
  ping?(): Promise<void>;
  /** Ends the store's connections (a receiver made with `closeStores: true` calls it in its `close()`). */
  close?(): void | Promise<void>;
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

/**
 * A transaction opened by a transactional store for one claim's holder: the handler
 * writes its effects through `client`, and the job's completion is written in the same
 * transaction, so both commit together or not at all (exactly-once effects).
 */
export interface StoreTransaction<Client = unknown> {
  /** The connection inside the open transaction (for PostgreSQL, a `pg` PoolClient). */
  readonly client: Client;
  /**
   * Writes the completion inside the transaction, only while the token that opened it
   * still holds the claim with its fencing number: `completed`, or `superseded` (nothing
   * written: commit nothing, roll back).
   */
  complete(options: { retainMs: number }): Promise<CompleteReply>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  /**
   * The holder just confirmed its lease (a renewal): keeps the transaction from being
   * ended as idle (PostgreSQL ends one left idle longer than the lease plus a margin, so
   * a holder cut off from the server does not keep the job's rows locked). Never throws.
   */
  keepAlive?(): void;
}

/** A store whose handlers can write their effects in the transaction that records the completion. */
export interface TransactionalStore<Client = unknown> extends IdempotencyStore {
  /** True when the store was made to hand handlers a transaction. */
  readonly transactional: boolean;
  /**
   * Opens a transaction for the holder (`token`, `fence`) of `jobId`'s claim. `leaseMs`:
   * the claim's lease; the transaction then ends if left idle longer than it plus a
   * margin, unless `keepAlive()` is called after each renewal.
   */
  begin(
    jobId: string,
    token: string,
    options: { fence: number; leaseMs?: number },
  ): Promise<StoreTransaction<Client>>;
}

/** The transaction client a store hands to handlers (`undefined` for stores without transactions). */
export type TransactionOf<S> = S extends TransactionalStore<infer C> ? C | undefined : undefined;

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
export type PendingStore = IdempotencyStore &
  Required<Pick<IdempotencyStore, 'trackPending' | 'listPending' | 'forgetPending' | 'deferPending'>>;

/** The `since` of a pending record: a finite epoch ms, now by default. */
function checkSince(since: unknown, what = 'since'): number {
  if (since === undefined) return Date.now();
  if (typeof since !== 'number' || !Number.isFinite(since))
    throw new TypeError(`${what} must be epoch milliseconds; got ${String(since)}`);
  return Math.floor(since);
}

/** `userParameters` as a JSON object, or undefined. */
function checkUserParameters(value: unknown): JsonObjectValue | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new TypeError('userParameters must be a JSON object');
  return value as JsonObjectValue;
}

/*
 * The arguments of each store operation, checked the same way by every store
 * (TypeError for a mistake): the stores differ only in how they keep things.
 */

export function claimArgs(
  jobId: unknown,
  options: ClaimOptions,
): { leaseMs: number; token: string; graceMs: number } {
  checkJobId(jobId);
  return {
    leaseMs: checkMs(options?.leaseMs, 'leaseMs'),
    token: options.token === undefined ? newToken() : checkToken(options.token),
    graceMs: checkGraceMs(options.takeoverGraceMs, 0),
  };
}

/**
 * How long the stores keep a claim past its lease (Redis: the key's life; a marked
 * claim's grace gets as much again; PostgreSQL: what `purgeExpired()` spares) and a
 * released claim (24 h, as long as the default retention): a delivery or the reconciler
 * that comes for the job meanwhile still finds the lapsed claim, and reports that the
 * job may run twice; a renewal or completion of a released claim arriving late is still
 * answered `superseded`. (The takeover grace itself starts only within GRACE_WINDOW_MS
 * of the lease end: see src/lib/jobs/model.ts.)
 */
export const LAPSED_CLAIM_KEEP_MS = 24 * 3_600_000;

/** A `takeoverGraceMs` option: whole milliseconds (fractions rounded up), 0 allowed; `fallback` when undefined. */
export function checkGraceMs(value: unknown, fallback: number): number {
  return Math.ceil(optionalNumber(value, 'takeoverGraceMs', fallback, { min: 0 }));
}

export function renewArgs(
  jobId: unknown,
  token: unknown,
  options: RenewOptions,
): { leaseMs: number; fence: number | undefined } {
  checkJobId(jobId);
  checkToken(token);
  return { leaseMs: checkMs(options?.leaseMs, 'leaseMs'), fence: checkFence(options?.fence) };
}

export function completeArgs(
  jobId: unknown,
  token: unknown,
  options: CompleteOptions,
): { retainMs: number; fence: number | undefined } {
  checkJobId(jobId);
  checkToken(token);
  return { retainMs: checkMs(options?.retainMs, 'retainMs'), fence: checkFence(options?.fence) };
}

/** A fencing number: a non-negative safe integer, or undefined. */
function checkFence(fence: unknown): number | undefined {
  if (fence === undefined) return undefined;
  if (typeof fence !== 'number' || !Number.isSafeInteger(fence) || fence < 0)
    throw new TypeError(`fence must be a non-negative integer; got ${String(fence)}`);
  return fence;
}

export function releaseArgs(jobId: unknown, token: unknown, options?: ReleaseOptions): { tainted: boolean } {
  checkJobId(jobId);
  checkToken(token);
  const tainted = options?.tainted;
  if (tainted !== undefined && typeof tainted !== 'boolean')
    throw new TypeError(`tainted must be true or false; got ${String(tainted)}`);
  return { tainted: tainted === true };
}

export function trackArgs(
  jobId: unknown,
  options: TrackPendingOptions | undefined,
): { since: number; userParameters: JsonObjectValue | undefined } {
  checkJobId(jobId);
  return { since: checkSince(options?.since), userParameters: checkUserParameters(options?.userParameters) };
}

export function deferArgs(jobId: unknown, options: DeferPendingOptions): { since: number } {
  checkJobId(jobId);
  if (options?.since === undefined)
    throw new TypeError('options.since is required: the epoch ms the pending record moves to');
  return { since: checkSince(options.since) };
}

export function listArgs(options: ListPendingOptions): { before: number; limit: number } {
  return {
    before: checkSince(options?.before, 'before'),
    limit: optionalNumber(options?.limit, 'limit', 100, { integer: true }),
  };
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
  if (typeof token !== 'string' || !TOKEN.test(token))
    throw new TypeError(
      `${what} must be 8–128 characters of letters, digits, - and _; got ${JSON.stringify(token)}`,
    );
  return token;
}

let tokenPrefix: string | undefined;
let tokenCount = 0;

/**
 * A fresh owner token: a random UUID drawn once per process (per thread) and a counter, so
 * tokens never repeat across the instances sharing a store, and a claim costs no random
 * draw (`randomUUID` per claim was ~1.5–3 µs of each delivery).
 */
export function newToken(): string {
  tokenPrefix ??= globalThis.crypto.randomUUID();
  return `${tokenPrefix}_${(tokenCount++).toString(36)}`;
}
