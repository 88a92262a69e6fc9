/**
 * The runtime's own node:crypto, for jobhook/web where it is there, reached WITHOUT a
 * `node:` import (jobhook/web imports none: a bundler for browsers or Workers would
 * refuse or polyfill it): Node ≥ 20.16, Bun and Deno hand their built-in modules out
 * through `process.getBuiltinModule`. Nothing is taken on trust: each operation is
 * probed with a known answer before it is used (Deno's publicDecrypt has no
 * RSA_NO_PADDING, for one).
 */

/** The part of node:crypto jobhook/web uses, typed here so that no Node type leaks in. */
export interface BuiltinCrypto {
  createPublicKey(options: {
    key: Uint8Array | Record<string, unknown>;
    format: 'der' | 'jwk';
    type?: 'spki';
  }): unknown;
  publicDecrypt(options: { key: unknown; padding: number }, buffer: Uint8Array): Uint8Array;
  constants: { RSA_NO_PADDING: number };
  createHash(algorithm: 'sha256'): {
    update(data: Uint8Array | string): { digest(): Uint8Array; digest(encoding: 'hex'): string };
  };
  /** Node ≥ 20.12 and 21.7: a one-shot hash without a Hash object. */
  hash?: {
    (algorithm: 'sha256', data: Uint8Array | string, encoding: 'buffer'): Uint8Array;
    (algorithm: 'sha256', data: Uint8Array | string, encoding: 'hex'): string;
  };
  timingSafeEqual?: (a: Uint8Array, b: Uint8Array) => boolean;
}

let cached: BuiltinCrypto | null | undefined;

/** node:crypto from `process.getBuiltinModule`, or undefined where the runtime has no such thing. */
export function builtinCrypto(): BuiltinCrypto | undefined {
  if (cached === undefined) {
    cached = null;
    try {
      const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
      const m =
        typeof proc?.getBuiltinModule === 'function'
          ? (proc.getBuiltinModule('node:crypto') as Partial<BuiltinCrypto> | undefined)
          : undefined;
      if (
        typeof m?.createPublicKey === 'function' &&
        typeof m.publicDecrypt === 'function' &&
        typeof m.createHash === 'function' &&
        typeof m.constants?.RSA_NO_PADDING === 'number'
      ) {
        cached = m as BuiltinCrypto;
      }
    } catch {
      cached = null;
    }
  }
  return cached ?? undefined;
}

/** SHA-256("abc"), FIPS 180-2 appendix B.1. */
const ABC_SHA256 = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';

/** SHA-256 by node:crypto: the digest's bytes, or its lowercase hex. */
export interface BuiltinSha256 {
  bytes(data: Uint8Array | string): Uint8Array;
  hex(data: Uint8Array | string): string;
}

let sha256: BuiltinSha256 | null | undefined;

/**
 * SHA-256 of bytes or of a text's UTF-8, synchronously, by node:crypto; undefined when
 * it is missing or gets the known answer wrong (then WebCrypto's asynchronous digest
 * is used).
 */
export function builtinSha256(): BuiltinSha256 | undefined {
  if (sha256 === undefined) {
    sha256 = null;
    const c = builtinCrypto();
    if (c !== undefined) {
      const oneShot = c.hash;
      const candidate: BuiltinSha256 =
        typeof oneShot === 'function'
          ? {
              bytes: (data) => oneShot('sha256', data, 'buffer'),
              hex: (data) => oneShot('sha256', data, 'hex'),
            }
          : {
              bytes: (data) => c.createHash('sha256').update(data).digest(),
              hex: (data) => c.createHash('sha256').update(data).digest('hex'),
            };
      try {
        const digest = candidate.bytes(new Uint8Array([0x61, 0x62, 0x63]));
        let hex = '';
        for (let k = 0; k < digest.length; k++) hex += digest[k]!.toString(16).padStart(2, '0');
        if (hex === ABC_SHA256 && candidate.hex('abc') === ABC_SHA256) sha256 = candidate;
      } catch {
        sha256 = null;
      }
    }
  }
  return sha256 ?? undefined;
}
