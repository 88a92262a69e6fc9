/** What bounds reading a body, in every adapter. */
export interface BodyLimits {
  /** Largest body, raw and after decoding, in bytes. */
  maxBodyBytes: number;
  /** The whole body must arrive within this (ms). */
  timeoutMs: number;
}
