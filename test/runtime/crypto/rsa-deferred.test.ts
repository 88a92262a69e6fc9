import crypto from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { deferredRsaPublicOperation } from '../../../src/lib/runtime/crypto/rsa-deferred.js';
import { createRsaPublicOperation } from '../../../src/lib/runtime/crypto/rsa-public.js';
import { publicPem } from '../../helpers/keys.js';

// The Node entries' RSA operation where node:crypto has none (Deno): rsa-public.ts and its
// WebAssembly are loaded in the background, and BigInt answers until they are. Its own file:
// each test file runs in a fresh module graph, so nothing loaded rsa-public.ts through it before.

function numbers(bits: 2048 | 3072) {
  const jwk = crypto.createPublicKey(publicPem(bits)).export({ format: 'jwk' });
  return {
    n: Buffer.from(jwk.n!, 'base64url'),
    e: Buffer.from(jwk.e!, 'base64url'),
    key: crypto.createPublicKey(publicPem(bits)),
  };
}

/** OpenSSL's raw public operation: the oracle. */
const raw = (key: crypto.KeyObject, s: Uint8Array) =>
  new Uint8Array(crypto.publicDecrypt({ key, padding: crypto.constants.RSA_NO_PADDING }, s));

describe('deferredRsaPublicOperation', () => {
  it("answers as OpenSSL from the first call: BigInt while rsa-public.ts loads, then that module's WebAssembly; keys made after the load use it at once", async () => {
    const { n, e, key } = numbers(2048);
    const op = deferredRsaPublicOperation(n, e);
    expect(op.modulusBytes).toBe(256);
    const bases = [new Uint8Array(256).fill(1), crypto.randomBytes(255), new Uint8Array([2])];
    expect(op.engine).toBe('bigint');
    for (const b of bases)
      expect(op.apply(b)).toEqual(raw(key, new Uint8Array([...new Uint8Array(256 - b.length), ...b])));
    expect(op.engine).toBe('bigint');
    await vi.waitFor(() => expect(op.engine).not.toBe('bigint'));
    for (const b of bases)
      expect(op.apply(b)).toEqual(raw(key, new Uint8Array([...new Uint8Array(256 - b.length), ...b])));
    expect(op.engine).toBe('wasm');

    const later = numbers(3072);
    const next = deferredRsaPublicOperation(later.n, later.e);
    const s = crypto.randomBytes(300);
    expect(next.apply(s)).toEqual(raw(later.key, new Uint8Array([...new Uint8Array(84), ...s])));
    expect(next.engine).toBe('wasm');
  });

  it('throws the RangeErrors createRsaPublicOperation throws, before and after the load', () => {
    const { n, e } = numbers(2048);
    expect(() => deferredRsaPublicOperation(new Uint8Array(3), e)).toThrow(
      new RangeError('the modulus is zero'),
    );
    expect(() => createRsaPublicOperation(new Uint8Array(3), e)).toThrow(
      new RangeError('the modulus is zero'),
    );
    const long = new Uint8Array(257).fill(1);
    const message = 'the base is 257 bytes, longer than the 256-byte modulus';
    expect(() => deferredRsaPublicOperation(n, e).apply(long)).toThrow(new RangeError(message));
    expect(() => createRsaPublicOperation(n, e).apply(long)).toThrow(new RangeError(message));
    // Leading zeros do not count.
    expect(
      deferredRsaPublicOperation(n, e).apply(new Uint8Array([0, 0, ...new Uint8Array(256).fill(1)])),
    ).toHaveLength(256);
  });
});
