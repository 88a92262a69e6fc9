/** What bounds reading a body, in every adapter. */
export interface BodyLimits {
  /** Largest body, raw and after decoding, in bytes. */
  maxBodyBytes: number;
  /** The whole body must arrive within this (ms). */
  timeoutMs: number;
}

/**
 * The client closed the request before its body arrived (a sender that gave up, a
 * dropped connection): nothing to answer, and nothing wrong with the receiver, so it
 * is logged at debug, not as an error.
 */
export class ClientAbortedError extends Error {
  constructor() {
    super('The client aborted the request before its body arrived');
    this.name = 'ClientAbortedError';
  }
}
