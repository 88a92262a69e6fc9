/**
 * The gateway's protocol as jobhook speaks it: header names, defaults and the rule for
 * job ids (the table from error codes to HTTP statuses is beside the codes, in
 * errors.ts). One place, so verifiers, receivers, stores and the CLI cannot drift
 * apart. Runtime-neutral.
 */
/** Header that carries the hex RSA signature (vendors prefix it differently, e.g. `X-Acme-Signature`). */
export const DEFAULT_SIGNATURE_HEADER = 'X-Service-Signature';
/** Header that names the hash algorithm; when present it must say SHA256. */
export const DEFAULT_ALGORITHM_HEADER = 'X-Service-Hash-Algorithm';
/** The gateway's marker header, `X-Service-Webhook: true`: a signer writes it, the verifier does not read it. */
export const DEFAULT_WEBHOOK_HEADER = 'X-Service-Webhook';
/** Largest body accepted by default: 25 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024;
/** Replay window by default: an event whose `finished_at` is older than 24 h is refused. */
export const DEFAULT_MAX_AGE_SECONDS = 24 * 60 * 60;
/**
 * Largest canonical text built by default, as a multiple of `maxBodyBytes`. Real
 * deliveries expand about 2.2× (indentation of nested OCR words); deeply nested
 * input can expand 1,000×, which this bounds.
 */
export const DEFAULT_CANONICAL_EXPANSION = 4;
/**
 * Lease of a claim, renewed every third of it while the handler runs. Short enough
 * that a crashed process frees its jobs before the gateway's last retry: after a
 * failed attempt it retries 1, 3 and 7 s later (backoff from 1 s, doubling).
 */
export const DEFAULT_LEASE_MS = 5_000;
/**
 * How long a claim waits, after finding another holder's lease over, before taking the
 * job over: time for a live holder cut off from the store (an outage longer than the
 * lease) to record its completion once the store answers (its repair queue retries at
 * least every second, and at once when the store answers another call).
 */
export const DEFAULT_TAKEOVER_GRACE_MS = 2_000;
/**
 * How long completed job ids are remembered by default: 24 h 5 min, the default replay
 * window (24 h) plus the default clock skew tolerated (5 min), past the later of the
 * event's `finished_at` and the completion.
 */
export const DEFAULT_RETAIN_MS = (24 * 60 * 60 + 300) * 1000;
/**
 * How far the signed `finished_at` may lie ahead of the receiver's clock by default (5
 * min of clock skew). Further ahead, the event is refused (EVENT_FROM_FUTURE): its
 * completion mark could expire before the replay window closes on it.
 */
export const DEFAULT_MAX_FUTURE_SKEW_SECONDS = 300;
/** The gateway gives up on an attempt after 30 s; a body still arriving then is dropped (408). */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;
/** The gateway's job collection: `POST` creates a job, `GET …/{id}` reads one. */
export const JOBS_PATH = '/v3/universal-ai/async';
/** Longest job id accepted, in characters (code points). */
export const MAX_JOB_ID_LENGTH = 256;

// C0 controls, DEL and C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Why a job id is unusable as an idempotency key, or undefined when it is fine: 1–256
 * characters of well-formed Unicode (no lone surrogate, which stores would merge with
 * other ids) without control characters (PostgreSQL refuses U+0000).
 */
export function jobIdProblem(jobId: unknown): string | undefined {
  if (typeof jobId !== 'string') return 'job_id is not a string';
  if (jobId.length === 0) return 'job_id is empty';
  if (!jobId.isWellFormed()) return 'job_id holds a lone surrogate (not well-formed Unicode)';
  if (CONTROL.test(jobId)) return 'job_id holds a control character';
  if (jobId.length > MAX_JOB_ID_LENGTH && [...jobId].length > MAX_JOB_ID_LENGTH)
    return `job_id is longer than ${MAX_JOB_ID_LENGTH} characters`;
  return undefined;
}
