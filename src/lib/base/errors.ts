/**
 * Every failure jobhook reports is a `WebhookError` with a stable `code`.
 * One subclass per code, so callers can `switch (err.code)` or use `instanceof`.
 */

/** The stable codes, one per subclass below. */
export type WebhookErrorCode =
  | 'BODY_TOO_LARGE'
  | 'BODY_TIMEOUT'
  | 'BODY_MALFORMED'
  | 'BODY_UNAVAILABLE'
  | 'ENCODING_UNSUPPORTED'
  | 'CANONICAL_UNREPRESENTABLE'
  | 'CANONICAL_TOO_LARGE'
  | 'SIGNATURE_MISSING'
  | 'SIGNATURE_MALFORMED'
  | 'ALGORITHM_UNSUPPORTED'
  | 'SIGNATURE_INVALID'
  | 'PAYLOAD_INVALID'
  | 'EVENT_TOO_OLD'
  | 'EVENT_FROM_FUTURE'
  | 'STORE_UNAVAILABLE'
  | 'STORE_NOT_MIGRATED'
  | 'RECEIVER_BUSY'
  | 'CLAIM_LOST'
  | 'JOB_SUPERSEDED';

/**
 * The HTTP status for each error code. The gateway retries 5xx and timeouts only, so
 * a 4xx is final: it is used where retrying cannot help (the request is not the
 * gateway's, or can never be processed) and 5xx where a retry can succeed.
 */
export const STATUS_BY_CODE: Readonly<Record<WebhookErrorCode, number>> = {
  BODY_TOO_LARGE: 413,
  BODY_TIMEOUT: 408,
  BODY_MALFORMED: 400,
  BODY_UNAVAILABLE: 500,
  ENCODING_UNSUPPORTED: 415,
  CANONICAL_UNREPRESENTABLE: 400,
  CANONICAL_TOO_LARGE: 413,
  SIGNATURE_MISSING: 401,
  SIGNATURE_MALFORMED: 401,
  ALGORITHM_UNSUPPORTED: 401,
  SIGNATURE_INVALID: 401,
  PAYLOAD_INVALID: 400,
  EVENT_TOO_OLD: 401,
  EVENT_FROM_FUTURE: 401,
  STORE_UNAVAILABLE: 503,
  STORE_NOT_MIGRATED: 503,
  RECEIVER_BUSY: 503,
  CLAIM_LOST: 503,
  JOB_SUPERSEDED: 500,
};

const BRAND = Symbol.for('jobhook.WebhookError');

/**
 * Base class of every error jobhook throws on purpose (bad arguments throw `TypeError`).
 * `status`, `statusCode` and `expose` follow the convention of http-errors, so the
 * default error handlers of Express, Koa and Fastify answer what jobhook's receivers
 * answer (401 for a forged signature, not 500).
 */
export abstract class WebhookError extends Error {
  abstract readonly code: WebhookErrorCode;
  /** @internal Recognises jobhook errors across copies of the package (ESM and CJS). */
  readonly [BRAND] = true;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }

  /** The HTTP status jobhook answers for this error: 4xx when a retry cannot help, 5xx when it can (the gateway retries only those). */
  get status(): number {
    return STATUS_BY_CODE[this.code];
  }
  set status(value: number) {
    own(this, 'status', value);
  }
  /** The same as `status` (Fastify and Node read this name). */
  get statusCode(): number {
    return STATUS_BY_CODE[this.code];
  }
  set statusCode(value: number) {
    own(this, 'statusCode', value);
  }
  /** True for a 4xx: the message may be shown to the sender (it holds no key material or backend detail); false for a 5xx. */
  get expose(): boolean {
    return STATUS_BY_CODE[this.code] < 500;
  }
  set expose(value: boolean) {
    own(this, 'expose', value);
  }
}

/**
 * Error handlers write these too (Koa sets `err.status` to what it answered): a write
 * gives the error its own value, as on an http-errors error. (The getters cannot be
 * fields: a subclass's `code` is set only after this constructor has run.)
 */
function own(err: WebhookError, key: 'status' | 'statusCode' | 'expose', value: unknown): void {
  Object.defineProperty(err, key, { value, writable: true, enumerable: true, configurable: true });
}

/** The body is larger than `maxBodyBytes`. */
export class BodyTooLargeError extends WebhookError {
  readonly code = 'BODY_TOO_LARGE' as const;
  constructor(readonly limit: number) {
    super(
      `The body is larger than the limit of ${limit} bytes (raise maxBodyBytes if such deliveries are expected).`,
    );
  }
}

/** The body did not arrive within `bodyTimeoutMs` (the sender gives an attempt 30 s). */
export class BodyTimeoutError extends WebhookError {
  readonly code = 'BODY_TIMEOUT' as const;
  /** `stalled`: the body stopped arriving (fewer than `bytes` in `ms`) before `timeoutMs`. */
  constructor(
    readonly timeoutMs: number,
    stalled?: { bytes: number; ms: number },
  ) {
    super(
      stalled === undefined
        ? `The body did not arrive within ${timeoutMs} ms.`
        : `The body stopped arriving: fewer than ${stalled.bytes} bytes came in ${stalled.ms} ms.`,
    );
  }
}

/** The body is not strict JSON (RFC 8259), has duplicate keys, invalid UTF-8 or is nested too deeply. */
export class BodyMalformedError extends WebhookError {
  readonly code = 'BODY_MALFORMED' as const;
  /** Byte offset in the body (UTF-8) where the problem was found. */
  readonly offset: number;
  constructor(reason: string, offset: number) {
    super(`Malformed JSON at byte ${offset}: ${reason}.`);
    this.offset = offset;
  }
}

/** The raw body bytes are not available (for example a framework already parsed them into an object). */
export class BodyUnavailableError extends WebhookError {
  readonly code = 'BODY_UNAVAILABLE' as const;
}

/** The request's Content-Encoding is not one jobhook decodes (gzip, deflate, br, identity). */
export class EncodingUnsupportedError extends WebhookError {
  readonly code = 'ENCODING_UNSUPPORTED' as const;
}

/** The payload cannot be written in the requested dialect (for example a lone surrogate in a UTF-8 dialect). */
export class CanonicalUnrepresentableError extends WebhookError {
  readonly code = 'CANONICAL_UNREPRESENTABLE' as const;
}

/**
 * The signature is genuine (it opened with a key) but the canonical text of the body
 * would exceed `maxCanonicalBytes`, so it is not built (deeply nested input expands
 * about 1,000×).
 */
export class CanonicalTooLargeError extends WebhookError {
  readonly code = 'CANONICAL_TOO_LARGE' as const;
  constructor(readonly limit: number) {
    super(
      `The canonical form of this body would exceed ${limit} bytes (maxCanonicalBytes), so it was not built; raise maxCanonicalBytes if such deliveries are expected.`,
    );
  }
}

/** The signature header is absent or empty. */
export class SignatureMissingError extends WebhookError {
  readonly code = 'SIGNATURE_MISSING' as const;
}

/** The signature header is not hex, or its length does not match any key's modulus. */
export class SignatureMalformedError extends WebhookError {
  readonly code = 'SIGNATURE_MALFORMED' as const;
}

/** The hash-algorithm header names something other than SHA256. */
export class AlgorithmUnsupportedError extends WebhookError {
  readonly code = 'ALGORITHM_UNSUPPORTED' as const;
}

/** No key opens the signature, or the hash it carries matches no dialect's canonical form of the body. */
/**
 * Why a signature was refused: no configured key opens it (`unknown-key`: forged, or the
 * receiver has the wrong key), a key opens it but the body is not what was signed
 * (`body-changed`: altered on the way, or a captured signature replayed with another
 * body), or it was verified and completed here with other bytes (`replayed`).
 */
export type SignatureInvalidReason = 'unknown-key' | 'body-changed' | 'replayed';

export class SignatureInvalidError extends WebhookError {
  readonly code = 'SIGNATURE_INVALID' as const;
  /** Why, where jobhook knows it. */
  readonly reason: SignatureInvalidReason | undefined;
  constructor(message: string, reason?: SignatureInvalidReason) {
    super(message);
    this.reason = reason;
  }
}

/** The signature is valid but the payload is not an `async_job_completed` event jobhook can hand over. */
export class PayloadInvalidError extends WebhookError {
  readonly code = 'PAYLOAD_INVALID' as const;
}

/** The signature is valid but `finished_at` is older than `maxAgeSeconds`. */
export class EventTooOldError extends WebhookError {
  readonly code = 'EVENT_TOO_OLD' as const;
}

/**
 * The signature is valid but `finished_at` lies further in the future than
 * `maxFutureSkewSeconds`: such an event would outlive its own completion mark and run
 * again when replayed (or the sender's clock is far off).
 */
export class EventFromFutureError extends WebhookError {
  readonly code = 'EVENT_FROM_FUTURE' as const;
}

/** The idempotency store could not be reached or answered with an error. */
export class StoreUnavailableError extends WebhookError {
  readonly code = 'STORE_UNAVAILABLE' as const;
}

/**
 * The store's tables (or a column added by a later version) are missing: `migrate()`
 * was not run on this database and schema (or the store was given another `schema` or
 * `table`). Every delivery is answered 503 until it is: the gateway retries them.
 */
export class StoreNotMigratedError extends WebhookError {
  readonly code = 'STORE_NOT_MIGRATED' as const;
}

/** Too many large deliveries wait for the verification workers: retry later (503). */
export class ReceiverBusyError extends WebhookError {
  readonly code = 'RECEIVER_BUSY' as const;
}

/**
 * This process lost its claim on a job: another delivery took it over, or its lease
 * could not be confirmed in time (the reason of an aborted `context.signal`; with a
 * transactional store the handler's transaction was rolled back, answered 503).
 */
export class ClaimLostError extends WebhookError {
  readonly code = 'CLAIM_LOST' as const;
}

/**
 * A job may have run twice: it was taken over from a holder whose lease lapsed, or a
 * holder finished its handler after another took the job over. Reported to `onError`
 * (stage `superseded`) and the log; never an answer to the sender.
 */
export class JobSupersededError extends WebhookError {
  readonly code = 'JOB_SUPERSEDED' as const;
  constructor(
    /** The job that may have run twice. */
    readonly jobId: string,
    detail: string,
  ) {
    super(`Job ${jobId} may have run twice: ${detail}.`);
  }
}

/** Union of every concrete error class, for exhaustive `switch` on `code`. */
export type AnyWebhookError =
  | BodyTooLargeError
  | BodyTimeoutError
  | BodyMalformedError
  | BodyUnavailableError
  | EncodingUnsupportedError
  | CanonicalUnrepresentableError
  | CanonicalTooLargeError
  | SignatureMissingError
  | SignatureMalformedError
  | AlgorithmUnsupportedError
  | SignatureInvalidError
  | PayloadInvalidError
  | EventTooOldError
  | EventFromFutureError
  | StoreUnavailableError
  | StoreNotMigratedError
  | ReceiverBusyError
  | ClaimLostError
  | JobSupersededError;

/**
 * True when `value` is a jobhook error, also one from another copy of the package
 * (ESM and CJS builds loaded together).
 *
 * @example
 * ```ts
 * try {
 *   verifier.verify(body, headers);
 * } catch (err) {
 *   if (!isWebhookError(err)) throw err;
 *   if (err.code === 'BODY_MALFORMED') console.warn('bad JSON at byte', err.offset);
 * }
 * ```
 */
export function isWebhookError(value: unknown): value is AnyWebhookError {
  return (
    value instanceof WebhookError ||
    (typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true)
  );
}

/** The codes of errors from the gateway's API (the client and the reconciler), a family apart from delivery errors. */
export type GatewayErrorCode =
  'GATEWAY_UNAUTHORIZED' | 'GATEWAY_REJECTED' | 'GATEWAY_NOT_FOUND' | 'GATEWAY_UNAVAILABLE';

const GATEWAY_BRAND = Symbol.for('jobhook.GatewayError');

/** Base class of the errors the gateway client throws: a stable `code` and the HTTP `status` when one came. */
export abstract class GatewayError extends Error {
  abstract readonly code: GatewayErrorCode;
  /** @internal Recognises gateway errors across copies of the package. */
  readonly [GATEWAY_BRAND] = true;
  constructor(
    message: string,
    /** The gateway's HTTP status, when it answered. */
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** 401/403: the token is missing, wrong or lacks the right. */
export class GatewayUnauthorizedError extends GatewayError {
  readonly code = 'GATEWAY_UNAUTHORIZED' as const;
}

/** 400/422 (or another 4xx): the gateway refused the request; `field` names the field when it says. */
export class GatewayRejectedError extends GatewayError {
  readonly code = 'GATEWAY_REJECTED' as const;
  constructor(
    message: string,
    status: number,
    /** The request field at fault, when the gateway names it. */
    readonly field?: string,
  ) {
    super(message, status);
  }
}

/** 404: the gateway does not know the job (never created, or forgotten). */
export class GatewayNotFoundError extends GatewayError {
  readonly code = 'GATEWAY_NOT_FOUND' as const;
}

/** 5xx, a timeout or a network error: worth retrying later. */
export class GatewayUnavailableError extends GatewayError {
  readonly code = 'GATEWAY_UNAVAILABLE' as const;
}

/** Union of the gateway error classes, for exhaustive `switch` on `code`. */
export type AnyGatewayError =
  GatewayUnauthorizedError | GatewayRejectedError | GatewayNotFoundError | GatewayUnavailableError;

/** True when `value` is an error of the gateway client, also from another copy of the package. */
export function isGatewayError(value: unknown): value is AnyGatewayError {
  return (
    value instanceof GatewayError ||
    (typeof value === 'object' &&
      value !== null &&
      (value as Record<symbol, unknown>)[GATEWAY_BRAND] === true)
  );
}
