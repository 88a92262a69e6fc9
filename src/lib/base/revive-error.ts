/** Errors across a thread boundary: sent as data, made again on this side with their class. */
import {
  AlgorithmUnsupportedError,
  BodyMalformedError,
  BodyTimeoutError,
  BodyTooLargeError,
  BodyUnavailableError,
  CanonicalTooLargeError,
  CanonicalUnrepresentableError,
  EncodingUnsupportedError,
  ClaimLostError,
  EventFromFutureError,
  EventTooOldError,
  JobSupersededError,
  PayloadInvalidError,
  ReceiverBusyError,
  SignatureInvalidError,
  SignatureMalformedError,
  SignatureMissingError,
  StoreNotMigratedError,
  StoreUnavailableError,
  type AnyWebhookError,
  type SignatureInvalidReason,
  type WebhookErrorCode,
} from './errors.js';

/** An error sent as data (from a worker thread): its code, message and numbers. */
export interface ErrorData {
  code?: string;
  name: string;
  message: string;
  offset?: number;
  limit?: number;
  jobId?: string;
  reason?: string;
}

const REVIVE: Record<WebhookErrorCode, (d: ErrorData) => AnyWebhookError> = {
  BODY_TOO_LARGE: (d) => new BodyTooLargeError(d.limit ?? 0),
  BODY_TIMEOUT: (d) => new BodyTimeoutError(d.limit ?? 0),
  BODY_MALFORMED: (d) => new BodyMalformedError('', d.offset ?? 0),
  BODY_UNAVAILABLE: (d) => new BodyUnavailableError(d.message),
  ENCODING_UNSUPPORTED: (d) => new EncodingUnsupportedError(d.message),
  CANONICAL_UNREPRESENTABLE: (d) => new CanonicalUnrepresentableError(d.message),
  CANONICAL_TOO_LARGE: (d) => new CanonicalTooLargeError(d.limit ?? 0),
  SIGNATURE_MISSING: (d) => new SignatureMissingError(d.message),
  SIGNATURE_MALFORMED: (d) => new SignatureMalformedError(d.message),
  ALGORITHM_UNSUPPORTED: (d) => new AlgorithmUnsupportedError(d.message),
  SIGNATURE_INVALID: (d) =>
    new SignatureInvalidError(d.message, d.reason as SignatureInvalidReason | undefined),
  PAYLOAD_INVALID: (d) => new PayloadInvalidError(d.message),
  EVENT_TOO_OLD: (d) => new EventTooOldError(d.message),
  EVENT_FROM_FUTURE: (d) => new EventFromFutureError(d.message),
  CLAIM_LOST: (d) => new ClaimLostError(d.message),
  JOB_SUPERSEDED: (d) => new JobSupersededError(d.jobId ?? '', d.message),
  STORE_UNAVAILABLE: (d) => new StoreUnavailableError(d.message),
  STORE_NOT_MIGRATED: (d) => new StoreNotMigratedError(d.message),
  RECEIVER_BUSY: (d) => new ReceiverBusyError(d.message),
};

/** The error an `ErrorData` describes: the same class, code, message and numbers. */
export function reviveError(d: ErrorData): Error {
  const make = d.code === undefined ? undefined : REVIVE[d.code as WebhookErrorCode];
  const err = make === undefined ? new Error(d.message) : make(d);
  Object.defineProperty(err, 'message', { value: d.message, writable: true, configurable: true });
  if (make === undefined) err.name = d.name;
  return err;
}
