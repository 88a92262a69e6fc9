import { StoreUnavailableError } from '../base/errors.js';

/**
 * Runs a store operation with a deadline; any failure or the deadline becomes
 * StoreUnavailableError, so receivers answer 503 instead of hanging.
 */
export async function guarded<T>(backend: string, operation: string, timeoutMs: number, run: () => Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`${backend} did not answer ${operation} within ${timeoutMs} ms.`)), timeoutMs);
  });
  try {
    return await Promise.race([run(), deadline]);
  } catch (err) {
    if (err instanceof StoreUnavailableError) throw err;
    if (err instanceof TypeError) throw err;
    throw new StoreUnavailableError(`${backend} failed on ${operation}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
