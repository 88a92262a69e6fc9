import { jobIdProblem } from '../protocol.js';

/** What a claim on a job id found. */
export type ClaimResult =
  /** This caller owns the job until the lease ends; pass `token` to complete/release. */
  | { status: 'acquired'; token: string }
  /** Another caller holds an unexpired lease; `retryAfterMs` is the time left on it when known. */
  | { status: 'in_progress'; retryAfterMs?: number }
  /** The job was completed within the retention window. */
  | { status: 'completed' };

export interface ClaimOptions {
  /** How long the claim holds before another delivery may take the job over (a crashed worker). */
  leaseMs: number;
}

export interface CompleteOptions {
  /** How long the completed mark is kept, so later retries are answered as duplicates. */
  retainMs: number;
}

/**
 * The idempotency contract (DESIGN §5), keyed by the gateway's `job_id`.
 * Every method rejects with `StoreUnavailableError` when the backend fails.
 */
export interface IdempotencyStore {
  claim(jobId: string, options: ClaimOptions): Promise<ClaimResult>;
  /** Marks the job completed. Resolves false (and changes nothing) when `token` no longer owns the claim. */
  complete(jobId: string, token: string, options: CompleteOptions): Promise<boolean>;
  /** Gives the claim up so a retry can process the job. Resolves false when `token` no longer owns it. */
  release(jobId: string, token: string): Promise<boolean>;
}

export const DEFAULT_LEASE_MS = 60_000;
export const DEFAULT_RETAIN_MS = 24 * 60 * 60 * 1000;

/**
 * The job id when a store can keep it apart from every other id (see `jobIdProblem`:
 * 1–256 characters of well-formed Unicode without control characters), else a TypeError.
 */
export function checkJobId(jobId: unknown): string {
  const problem = jobIdProblem(jobId);
  if (problem !== undefined) throw new TypeError(`jobId is not usable as an idempotency key: ${problem}`);
  return jobId as string;
}

export function checkPositive(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 1) throw new TypeError(`${what} must be a number ≥ 1; got ${String(value)}`);
  return Math.ceil(value);
}

/** A fresh owner token. */
export function newToken(): string {
  return globalThis.crypto.randomUUID();
}
