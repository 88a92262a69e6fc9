/**
 * The RSA public operation for the Node entries where node:crypto has none (Deno): the
 * answers of createRsaPublicOperation (WebAssembly, else BigInt), whose module is loaded
 * in the background from the first key on, and BigInt's until it is. So importing
 * jobhook compiles neither that module nor its 15 kB of embedded WebAssembly where
 * node:crypto does the operation (Node, Bun), and the operation stays synchronous.
 */
import { baseFor, bigIntOperation, rsaNumbers } from './rsa-bigint.js';
import type { RsaPublicEngine, RsaPublicOperation } from './rsa-public.js';

type RsaPublicModule = typeof import('./rsa-public.js');

/** rsa-public.ts once loaded; the load, started by the first key. */
let loaded: RsaPublicModule | undefined;
let loading: Promise<RsaPublicModule> | undefined;

/**
 * `s^e mod n` for one key (`modulus`, `exponent`: big-endian bytes), as
 * createRsaPublicOperation's: the same answers and RangeErrors. `engine` is 'bigint'
 * while rsa-public.ts loads (and where it cannot be loaded), then that operation's.
 */
export function deferredRsaPublicOperation(modulus: Uint8Array, exponent: Uint8Array): RsaPublicOperation {
  const numbers = rsaNumbers(modulus, exponent);
  let full = loaded?.createRsaPublicOperation(numbers.n, numbers.e);
  let big: ((b: Uint8Array) => Uint8Array) | undefined;
  if (full === undefined) {
    loading ??= import('./rsa-public.js').then((m) => (loaded = m));
    // No unhandled rejection where the module cannot be loaded: BigInt then, for good.
    loading.then(
      (m) => {
        full = m.createRsaPublicOperation(numbers.n, numbers.e);
      },
      () => undefined,
    );
  }
  return {
    modulusBytes: numbers.modulusBytes,
    get engine(): RsaPublicEngine | undefined {
      return full === undefined ? 'bigint' : full.engine;
    },
    apply(base) {
      if (full !== undefined) return full.apply(base);
      const b = baseFor(base, numbers.modulusBytes);
      return (big ??= bigIntOperation(numbers))(b);
    },
  };
}
