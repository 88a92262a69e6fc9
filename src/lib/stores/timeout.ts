import { StoreNotMigratedError, StoreUnavailableError } from '../base/errors.js';
import { storeFailure, storeTimeout } from './diagnose.js';

/**
 * Runs a store operation with a deadline; any failure or the deadline becomes
 * StoreUnavailableError naming the server and the cause (`backend`: its name and
 * address; `last`: the client's last connection error, when it keeps one), so receivers
 * answer 503 instead of hanging. A StoreNotMigratedError stays what it is.
 */
export async function guarded<T>(
  backend: string,
  operation: string,
  timeoutMs: number,
  run: () => Promise<T>,
  last?: () => unknown,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(storeTimeout(backend, operation, timeoutMs, last?.())), timeoutMs);
  });
  try {
    return await Promise.race([run(), deadline]);
  } catch (err) {
    if (err instanceof StoreUnavailableError || err instanceof StoreNotMigratedError) throw err;
    if (err instanceof TypeError) throw err;
    throw storeFailure(backend, operation, err, last?.());
  } finally {
    clearTimeout(timer);
  }
}
