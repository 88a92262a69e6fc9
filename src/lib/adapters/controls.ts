/** What every receiver offers besides handling requests. */
export interface ReceiverControls {
  /**
   * Finishes the store operations still waiting (a completion or a release the store
   * did not take while it was down), for a graceful shutdown: `await receiver.close()`
   * after the server stopped accepting requests. Resolves after `timeoutMs` (default
   * 10 s) at the latest.
   */
  close(timeoutMs?: number): Promise<void>;
  /** Store operations waiting to be retried in the background. */
  readonly pending: number;
}

/** `fn` with the controls of the receiver's job runner attached. */
export function withControls<F extends object>(
  fn: F,
  runner: { close(timeoutMs?: number): Promise<void>; readonly pending: number },
  also?: { close(): Promise<void> },
): F & ReceiverControls {
  const close = async (timeoutMs?: number) => {
    await runner.close(timeoutMs);
    await also?.close();
  };
  return Object.defineProperties(fn, {
    close: { value: close, enumerable: true },
    pending: { get: () => runner.pending, enumerable: true },
  }) as F & ReceiverControls;
}
