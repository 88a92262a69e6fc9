/**
 * The gateway's key(s) as a verifier holds them: imported once, at construction when
 * they are given, or at the first delivery when `publicKey` is a function (a key that
 * exists only at run time, e.g. `next build` collecting a route without it).
 */

/** The keys themselves: one, or several during a rotation. */
export type KeyInput<K> = K | readonly K[];

/**
 * A function that gives the key(s) when the first delivery needs them (sync or async).
 * Called once: its result is kept. A throwing or rejecting call, or an unusable key,
 * fails that delivery (the receivers answer 500, so the gateway retries) and the
 * function is called again at the next one.
 */
export type KeyFunction<K> = () => KeyInput<K> | PromiseLike<KeyInput<K>>;

/** `publicKey` as the verifiers take it: the key(s), or a function that gives them. */
export type PublicKeySource<K> = KeyInput<K> | KeyFunction<K>;

/** One key or several (rotation) as a non-empty list. */
export function keyList<K>(publicKey: K | readonly K[] | undefined): readonly K[] {
  if (publicKey === undefined || publicKey === null) throw new TypeError('publicKey is required');
  const list = Array.isArray(publicKey) ? (publicKey as readonly K[]) : [publicKey as K];
  if (list.length === 0) throw new TypeError('publicKey must hold at least one key');
  return list;
}

/** Imports every key once, naming the failing one: `publicKey[i]: reason`. */
export function importKeys<K, T>(publicKey: K | readonly K[] | undefined, importOne: (key: K) => T): T[] {
  return keyList(publicKey).map((k, i) => {
    try {
      return importOne(k);
    } catch (err) {
      if (err instanceof TypeError) throw new TypeError(`publicKey[${i}]: ${err.message}`);
      throw new TypeError(`publicKey[${i}] could not be imported: ${(err as Error).message}`);
    }
  });
}

/** Keys imported, with the inputs they came from (the worker threads import them again). */
export interface KeySet<K, T> {
  readonly inputs: readonly K[];
  readonly imported: readonly T[];
  /** Modulus size of each key, in bytes: the signature's length says which keys to try. */
  readonly modulusBytes: readonly number[];
}

/** Where a verifier gets its keys: in hand at once, or from the key function at first need. */
export interface KeyRing<K, T> {
  /** The keys when in hand: given at construction, or resolved by an earlier delivery. */
  readonly ready: KeySet<K, T> | undefined;
  /** The keys, calling the key function if they are not in hand (one call shared by concurrent deliveries). */
  get(): Promise<KeySet<K, T>>;
  /** The same, for a synchronous verifier: a key function that answers with a promise is refused (TypeError). */
  getSync(): KeySet<K, T>;
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === 'object' || typeof value === 'function') &&
  value !== null &&
  typeof (value as { then?: unknown }).then === 'function';

/** True for `async () => …`: its result is always a promise, so a synchronous verifier can refuse it at construction. */
export function isAsyncFunction(fn: unknown): boolean {
  return typeof fn === 'function' && Object.prototype.toString.call(fn) === '[object AsyncFunction]';
}

/** The sentence a synchronous verifier refuses an asynchronous key function with. */
export const ASYNC_KEY_REFUSED =
  "publicKey is an async function, but createVerifier().verify from 'jobhook' is synchronous: give a function that returns the key itself, " +
  "or use a receiver (createReceiver from 'jobhook', 'jobhook/express' or 'jobhook/web'), or createVerifier from 'jobhook/web', which resolve it at the first delivery";

/**
 * A key function that failed (threw, rejected, gave nothing usable). Not a WebhookError:
 * the delivery is not at fault, so the receivers answer 500 (the gateway retries) and
 * log it; the function is called again at the next delivery.
 */
function keyFunctionFailed(err: unknown): Error {
  const reason = err instanceof Error ? err.message : String(err);
  return new Error(
    `jobhook: the publicKey function did not give a usable key: ${reason}. This verification failed; the function is called again at the next one.`,
    { cause: err },
  );
}

/** Imports the given keys, with what a verifier needs of them. */
function keySet<K, T extends { modulusBytes: number }>(
  given: KeyInput<K> | undefined,
  importOne: (key: K) => T,
): KeySet<K, T> {
  const imported = importKeys(given, importOne);
  return { inputs: keyList(given), imported, modulusBytes: imported.map((k) => k.modulusBytes) };
}

/**
 * The keys of a verifier. Given keys are imported now (TypeError naming the bad one);
 * a function is only checked to be one, and called when `get()` first needs it.
 */
export function keyRing<K, T extends { modulusBytes: number }>(
  publicKey: PublicKeySource<K> | undefined,
  importOne: (key: K) => T,
): KeyRing<K, T> {
  if (typeof publicKey === 'function') return new KeyFunctionRing(publicKey as KeyFunction<K>, importOne);
  const ready = keySet(publicKey, importOne);
  return { ready, get: () => Promise.resolve(ready), getSync: () => ready };
}

/** The keys of a key function: asked at first need, kept once usable, asked again after a failure. */
class KeyFunctionRing<K, T extends { modulusBytes: number }> implements KeyRing<K, T> {
  private keys: KeySet<K, T> | undefined;
  /** The call under way (one shared by concurrent deliveries). */
  private pending: Promise<KeySet<K, T>> | undefined;

  constructor(
    private readonly fn: KeyFunction<K>,
    private readonly importOne: (key: K) => T,
  ) {}

  get ready(): KeySet<K, T> | undefined {
    return this.keys;
  }

  get(): Promise<KeySet<K, T>> {
    if (this.keys !== undefined) return Promise.resolve(this.keys);
    if (this.pending === undefined) {
      this.pending = this.call();
      // Kept when it worked (ready), forgotten when it failed: the next delivery asks again.
      const forget = () => {
        this.pending = undefined;
      };
      this.pending.then(forget, forget);
    }
    return this.pending;
  }

  getSync(): KeySet<K, T> {
    if (this.keys !== undefined) return this.keys;
    const { fn } = this;
    let given: KeyInput<K> | PromiseLike<KeyInput<K>>;
    try {
      given = fn();
    } catch (err) {
      throw keyFunctionFailed(err);
    }
    if (isThenable(given)) {
      // The promise is dropped: keep a rejection from being reported as unhandled.
      Promise.resolve(given).catch(() => undefined);
      throw new TypeError(ASYNC_KEY_REFUSED.replace('is an async function', 'returned a promise'));
    }
    return this.settle(given);
  }

  private async call(): Promise<KeySet<K, T>> {
    const { fn } = this;
    let given: KeyInput<K>;
    try {
      given = await fn();
    } catch (err) {
      throw keyFunctionFailed(err);
    }
    return this.settle(given);
  }

  /** Imports what the function gave and keeps it; a key that cannot be imported fails this call. */
  private settle(given: KeyInput<K>): KeySet<K, T> {
    try {
      this.keys = keySet(given, this.importOne);
    } catch (err) {
      throw keyFunctionFailed(err);
    }
    return this.keys;
  }
}
