import { builtinCrypto, builtinSha256, type BuiltinCrypto } from './builtin-crypto.js';
import { checkModulusBits, normalizeKey, type RsaPublicJwk } from '../../core/crypto/keys.js';
import { constantTimeEqual, expectedPrefix, hashFromBlock } from '../../core/crypto/pkcs1.js';
import { modPowBigInt } from './rsa-bigint.js';
import type { RsaPublicOperation } from './rsa-public.js';

/** Public key forms the WebCrypto verifier imports. */
export type WebPublicKeyInput = string | Uint8Array | ArrayBuffer | RsaPublicJwk | CryptoKey;

/**
 * How a key opens signatures (the RSA public operation):
 * - `node-crypto`: the runtime's node:crypto `publicDecrypt` with RSA_NO_PADDING (Node,
 *   Bun…), reached through `process.getBuiltinModule` and probed on the key first;
 * - `wasm`: jobhook's own WebAssembly (native/rsa.c), where node:crypto cannot (Deno,
 *   browsers);
 * - `bigint`: BigInt arithmetic, where WebAssembly cannot be compiled from bytes
 *   (Cloudflare Workers).
 */
export type WebRsaBackend = 'node-crypto' | 'wasm' | 'bigint';

/** A key prepared once: what opening a signature needs. */
export interface ImportedWebKey {
  modulusBytes: number;
  /** As the Node key's `open`: the 32-byte hash the signer signed, or undefined. */
  open(signature: Uint8Array): Promise<Uint8Array | undefined>;
  /**
   * The backend in use: for a key given as PEM, DER or JWK decided at construction
   * ('wasm' turns into 'bigint' at the first open where WebAssembly cannot be
   * compiled); for a CryptoKey undefined until the first open.
   */
  backend(): WebRsaBackend | undefined;
}

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (s === undefined)
    throw new TypeError('WebCrypto (globalThis.crypto.subtle) is not available in this runtime');
  return s;
}

function isCryptoKey(value: unknown): value is CryptoKey {
  return typeof CryptoKey !== 'undefined' && value instanceof CryptoKey;
}

let hexDigits: string[] | undefined;

export function bytesToHex(bytes: Uint8Array): string {
  const digits = (hexDigits ??= Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0')));
  let hex = '';
  for (let k = 0; k < bytes.length; k++) hex += digits[bytes[k]!];
  return hex;
}

function bytesToBigInt(bytes: Uint8Array): bigint {
  return bytes.length === 0 ? 0n : BigInt('0x' + bytesToHex(bytes));
}

function bigIntToBytes(value: bigint, length: number): Uint8Array {
  const hex = value.toString(16).padStart(length * 2, '0');
  const out = new Uint8Array(length);
  for (let k = 0; k < length; k++) out[k] = parseInt(hex.slice(2 * k, 2 * k + 2), 16);
  return out;
}

/**
 * `base^exponent mod modulus` on BigInt (square-and-multiply; the operation is public,
 * so it need not be constant-time). jobhook/web's own opening uses
 * `createRsaPublicOperation` (src/lib/runtime/crypto/rsa-public.ts): WebAssembly where it can be
 * compiled, this arithmetic elsewhere.
 */
export const modPow: (base: bigint, exponent: bigint, modulus: bigint) => bigint = modPowBigInt;

/** The numbers of a key: big-endian bytes without leading zeros, and how node:crypto can import it. */
interface KeyNumbers {
  modulus: Uint8Array;
  exponent: Uint8Array;
  nodeKey: { key: Uint8Array; format: 'der'; type: 'spki' } | { key: Record<string, unknown>; format: 'jwk' };
}

function stripped(bytes: Uint8Array): Uint8Array {
  let start = 0;
  while (start < bytes.length && bytes[start] === 0) start++;
  return bytes.subarray(start);
}

/** -1, 0, 1 as big-endian a is below, equal to, above b (same length). */
function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return a[k]! < b[k]! ? -1 : 1;
  return 0;
}

/**
 * node:crypto's raw public operation for the key, when a probe on the key itself gives
 * the right answer: (n − 2)^e mod n = n − (2^e mod n) for the odd e of any RSA key,
 * computed here with BigInt (one shift and one division for e = 65537). Undefined when
 * the runtime's node:crypto is missing, throws, or answers wrong (Deno's publicDecrypt
 * has no RSA_NO_PADDING).
 */
function nodeCryptoOperation(
  c: BuiltinCrypto,
  numbers: KeyNumbers,
  modulusBytes: number,
): ((s: Uint8Array) => Uint8Array) | undefined {
  try {
    const key = c.createPublicKey(numbers.nodeKey);
    const padding = c.constants.RSA_NO_PADDING;
    const raw = (s: Uint8Array) => c.publicDecrypt({ key, padding }, s);
    const n = bytesToBigInt(numbers.modulus);
    const e = bytesToBigInt(numbers.exponent);
    if ((e & 1n) === 0n) return undefined;
    const twoToE = e <= 1n << 20n ? (1n << e) % n : modPowBigInt(2n, e, n);
    const got = raw(bigIntToBytes(n - 2n, modulusBytes));
    const want = bigIntToBytes(n - twoToE, modulusBytes);
    return got.length === modulusBytes && compareBytes(got, want) === 0 ? raw : undefined;
  } catch {
    return undefined;
  }
}

/**
 * For prepareWebKey: `backend` 'auto' (production) or a portable one forced;
 * `nodeCrypto` the runtime's node:crypto to probe (default: process.getBuiltinModule's;
 * tests give a broken one, or null for none).
 */
export interface WebKeyOptions {
  backend?: 'auto' | 'wasm' | 'bigint';
  nodeCrypto?: BuiltinCrypto | null;
}

interface Operation {
  backend(): WebRsaBackend;
  /** A promise while what `apply` needs is loading (the WebAssembly operation's module), else undefined. */
  loading(): Promise<unknown> | undefined;
  apply(signature: Uint8Array): Uint8Array;
  equal: (a: Uint8Array, b: Uint8Array) => boolean;
}

/**
 * jobhook's own operation (rsa-public.ts: WebAssembly, else BigInt), its module loaded
 * from here on and awaited by the first open: where node:crypto does the operation,
 * importing jobhook/web compiles neither that module nor its embedded WebAssembly.
 */
function portableOperation(numbers: KeyNumbers, bigint: boolean): Operation {
  let rsa: RsaPublicOperation | undefined;
  let loading: Promise<unknown> | undefined = import('./rsa-public.js').then((m) => {
    // WebAssembly is compiled, and the key prepared in it, at the first apply.
    rsa = m.createRsaPublicOperation(numbers.modulus, numbers.exponent, {
      engine: bigint ? 'bigint' : undefined,
    });
    loading = undefined;
  });
  loading.catch(() => undefined); // rethrown by the first open, not reported as unhandled
  return {
    backend: () => (rsa?.engine === 'bigint' || bigint ? 'bigint' : 'wasm'),
    loading: () => loading,
    apply: (s) => rsa!.apply(s),
    equal: constantTimeEqual,
  };
}

function operationFor(numbers: KeyNumbers, modulusBytes: number, options: WebKeyOptions): Operation {
  const choice = options.backend ?? 'auto';
  const c =
    choice === 'auto'
      ? options.nodeCrypto === undefined
        ? builtinCrypto()
        : (options.nodeCrypto ?? undefined)
      : undefined;
  const viaNode = c === undefined ? undefined : nodeCryptoOperation(c, numbers, modulusBytes);
  if (viaNode !== undefined) {
    const safeEqual = c!.timingSafeEqual;
    const equal =
      typeof safeEqual === 'function'
        ? (a: Uint8Array, b: Uint8Array) => a.length === b.length && safeEqual(a, b)
        : constantTimeEqual;
    return { backend: () => 'node-crypto', loading: () => undefined, apply: viaNode, equal };
  }
  return portableOperation(numbers, choice === 'bigint');
}

function opener(
  modulusBytes: number,
  numbers: KeyNumbers | Promise<KeyNumbers>,
  options: WebKeyOptions,
): ImportedWebKey {
  const prefix = expectedPrefix(modulusBytes);
  const ready = (k: KeyNumbers) => ({ modulus: k.modulus, op: operationFor(k, modulusBytes, options) });
  let prepared: { modulus: Uint8Array; op: Operation } | undefined;
  let pending: Promise<{ modulus: Uint8Array; op: Operation }> | undefined;
  if (numbers instanceof Promise) pending = numbers.then(ready);
  else prepared = ready(numbers);
  pending?.catch(() => undefined); // an early rejection is rethrown at first use, not reported as unhandled
  return {
    modulusBytes,
    backend: () => prepared?.op.backend(),
    async open(signature) {
      prepared ??= await pending!;
      const { modulus, op } = prepared;
      // Not a signature of this key: a number not below the modulus (OpenSSL would throw).
      if (
        signature.length !== modulusBytes ||
        modulus.length !== modulusBytes ||
        compareBytes(signature, modulus) >= 0
      )
        return undefined;
      const loading = op.loading();
      if (loading !== undefined) await loading;
      return hashFromBlock(op.apply(signature), prefix, op.equal);
    },
  };
}

function base64UrlToBytes(value: string): Uint8Array {
  const b64 = value.replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  const out = new Uint8Array(bin.length);
  for (let k = 0; k < bin.length; k++) out[k] = bin.charCodeAt(k);
  return out;
}

/**
 * Checks the key synchronously (TypeError at construction) and returns its opener.
 * For a PEM, DER or JWK the backend is chosen here: node:crypto where a probe on this
 * key passes, else WebAssembly (loaded at the first open), else BigInt. `options`
 * force a portable backend or give the node:crypto to probe (tests, benchmarks).
 */
export function prepareWebKey(input: WebPublicKeyInput, options: WebKeyOptions = {}): ImportedWebKey {
  if (isCryptoKey(input)) {
    const alg = input.algorithm as RsaHashedKeyAlgorithm;
    if (!alg.name.startsWith('RSA'))
      throw new TypeError(
        `publicKey CryptoKey is for ${alg.name}; expected an RSA key (RSASSA-PKCS1-v1_5 with SHA-256)`,
      );
    if (input.type !== 'public')
      throw new TypeError(`publicKey CryptoKey is a ${input.type} key; expected the gateway's public key`);
    if (!input.extractable) {
      throw new TypeError(
        'publicKey CryptoKey is not extractable: jobhook opens the signature itself (one modular exponentiation, so a forged request costs no parsing); import it with extractable: true, or pass the PEM or JWK',
      );
    }
    checkModulusBits(alg.modulusLength);
    const numbers = subtle()
      .exportKey('jwk', input)
      .then((jwk): KeyNumbers => ({
        modulus: stripped(base64UrlToBytes(jwk.n!)),
        exponent: stripped(base64UrlToBytes(jwk.e!)),
        nodeKey: { key: { kty: 'RSA', n: jwk.n!, e: jwk.e! }, format: 'jwk' },
      }));
    return opener(Math.ceil(alg.modulusLength / 8), numbers, options);
  }
  const key = normalizeKey(input);
  const numbers: KeyNumbers = {
    modulus: stripped(key.modulus),
    exponent: stripped(key.exponent),
    nodeKey:
      key.kind === 'spki'
        ? { key: key.spki, format: 'der', type: 'spki' }
        : { key: { ...key.jwk }, format: 'jwk' },
  };
  return opener(Math.ceil(key.modulusBits / 8), numbers, options);
}

const encoder = new TextEncoder();

/** Lowercase hex SHA-256 of bytes: node:crypto where its probe passes (synchronous), else WebCrypto. */
export async function sha256HexWeb(data: Uint8Array): Promise<string> {
  const sync = builtinSha256();
  if (sync !== undefined) return sync.hex(data);
  return bytesToHex(new Uint8Array(await subtle().digest('SHA-256', data as BufferSource)));
}

/** SHA-256 of the ASCII bytes of a hex digest: the `H` a PKCS#1 block carries for it. */
export async function sha256OfHexWeb(digestHex: string): Promise<Uint8Array> {
  const sync = builtinSha256();
  if (sync !== undefined) return sync.bytes(digestHex);
  return new Uint8Array(await subtle().digest('SHA-256', encoder.encode(digestHex)));
}

/** WebCrypto's SHA-256 alone, as where node:crypto is missing (tests). */
export async function sha256HexSubtle(data: Uint8Array): Promise<string> {
  return bytesToHex(new Uint8Array(await subtle().digest('SHA-256', data as BufferSource)));
}
