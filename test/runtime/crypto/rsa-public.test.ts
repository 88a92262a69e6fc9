import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createRsaPublicOperation, modPowBigInt } from '../../../src/lib/runtime/crypto/rsa-public.js';
import { prepareWasmRsaKey, wasmRsaAvailable } from '../../../src/lib/runtime/crypto/rsa-wasm.js';

// The WebAssembly modular exponentiation (native/rsa.c) against BigInt arithmetic, the oracle.

/** The oracle: right-to-left square-and-multiply, written here independently of rsa-public.ts. */
function oracle(base: bigint, exponent: bigint, modulus: bigint): bigint {
  let result = 1n % modulus;
  let b = base % modulus;
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % modulus;
    b = (b * b) % modulus;
  }
  return result;
}

const toBig = (b: Uint8Array) => (b.length === 0 ? 0n : BigInt('0x' + Buffer.from(b).toString('hex')));
const toBytes = (v: bigint, length: number) =>
  new Uint8Array(Buffer.from(v.toString(16).padStart(length * 2, '0'), 'hex'));

/** An odd modulus of exactly `bytes` bytes (top bit set unless `loose`). */
function modulusOf(seed: Uint8Array, loose = false): Uint8Array {
  const n = seed.slice();
  n[n.length - 1]! |= 1;
  if (!loose) n[0]! |= 0x80;
  else if (n[0] === 0) n[0] = 1;
  return n;
}

/** The bases that test the edges: 0, 1, 2, n−1, n, n+1, the largest of the length, and random ones on both sides of n. */
function edgeBases(n: bigint, length: number): bigint[] {
  const top = (1n << BigInt(8 * length)) - 1n;
  return [
    0n,
    1n,
    2n,
    n - 1n,
    n,
    n + 1n,
    top,
    toBig(randomBytes(length)) % n,
    toBig(randomBytes(length)),
  ].filter((b) => b >= 0n && b <= top);
}

function check(modulus: Uint8Array, exponent: Uint8Array, bases: bigint[]): string[] {
  const n = toBig(modulus);
  const e = toBig(exponent);
  const rsa = createRsaPublicOperation(modulus, exponent);
  const wrong: string[] = [];
  for (const b of bases) {
    const got = toBig(rsa.apply(toBytes(b, modulus.length)));
    const want = oracle(b, e, n);
    if (got !== want)
      wrong.push(
        `n=${n.toString(16).slice(0, 16)}… (${modulus.length} B) e=${e} s=${b.toString(16).slice(0, 16)}…`,
      );
  }
  expect(rsa.engine).toBe('wasm');
  return wrong;
}

describe('the WebAssembly RSA public operation (native/rsa.c) against BigInt', () => {
  it('loads here (Node compiles WebAssembly from bytes)', () => {
    expect(wasmRsaAvailable()).toBe(true);
  });

  it('e = 65537 and e = 3, moduli of 2048–8192 bits and the sizes where the limb width changes: every edge base', () => {
    const wrong: string[] = [];
    // 28-bit limbs up to 441 bytes, 27 from 442, 26 from 1722 (rsa.c pick_radix).
    for (const bytes of [256, 384, 441, 442, 512, 1024, 1721, 1722, 2048]) {
      // A random modulus, and n = 2^(8 bytes) − 1: every limb and every product at its largest.
      for (const n of [modulusOf(randomBytes(bytes)), new Uint8Array(bytes).fill(0xff)]) {
        for (const e of [[0x01, 0x00, 0x01], [0x03]])
          wrong.push(...check(n, new Uint8Array(e), edgeBases(toBig(n), bytes)));
      }
    }
    expect(wrong).toEqual([]);
  });

  it('random odd moduli of 2–600 bytes, random exponents and bases (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 600 }).chain((len) =>
          fc.record({
            n: fc.uint8Array({ minLength: len, maxLength: len }),
            loose: fc.boolean(),
            e: fc.oneof(
              fc.constant(Uint8Array.of(1, 0, 1)),
              fc.uint8Array({ minLength: 1, maxLength: 6 }),
              fc.uint8Array({ minLength: 1, maxLength: 40 }),
            ),
            s: fc.uint8Array({ minLength: len, maxLength: len }),
          }),
        ),
        ({ n, loose, e, s }) => {
          const modulus = modulusOf(n, loose);
          const exponent = e.some((x) => x !== 0) ? e : Uint8Array.of(1);
          const big = toBig(modulus);
          // A modulus whose first byte is small has fewer significant bytes: the bases then have that length.
          let start = 0;
          while (modulus[start] === 0) start++;
          const length = modulus.length - start;
          const base = toBig(s) % (1n << BigInt(8 * length));
          expect(check(modulus, exponent, [base, 0n, 1n, big - 1n, big])).toEqual([]);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('several keys used in turn share one instance (each key puts its numbers back)', () => {
    const keys = [256, 512, 384, 256].map((b) => modulusOf(randomBytes(b)));
    const ops = keys.map((n) => createRsaPublicOperation(n, Uint8Array.of(1, 0, 1)));
    for (let round = 0; round < 3; round++) {
      keys.forEach((n, i) => {
        const s = toBig(randomBytes(n.length)) % toBig(n);
        expect(toBig(ops[i]!.apply(toBytes(s, n.length)))).toBe(oracle(s, 65537n, toBig(n)));
      });
    }
  });

  it('bases shorter than the modulus, and leading zeros, are the same numbers', () => {
    const n = modulusOf(randomBytes(256));
    const rsa = createRsaPublicOperation(Uint8Array.of(0, 0, ...n), Uint8Array.of(0, 1, 0, 1));
    expect(rsa.modulusBytes).toBe(256);
    const want = toBytes(oracle(0x1234n, 65537n, toBig(n)), 256);
    expect(rsa.apply(Uint8Array.of(0x12, 0x34))).toEqual(want);
    expect(rsa.apply(toBytes(0x1234n, 256))).toEqual(want);
    expect(() => rsa.apply(new Uint8Array(257).fill(1))).toThrow(RangeError);
  });

  it('keys the module does not take go to BigInt: an even modulus, one over 16384 bits', () => {
    const even = randomBytes(256);
    even[0]! |= 0x80;
    even[255]! &= 0xfe;
    expect(prepareWasmRsaKey(even, Uint8Array.of(3))).toBeUndefined();
    const rsa = createRsaPublicOperation(even, Uint8Array.of(3));
    const s = toBig(randomBytes(256)) % toBig(even);
    expect(toBig(rsa.apply(toBytes(s, 256)))).toBe(oracle(s, 3n, toBig(even)));
    expect(rsa.engine).toBe('bigint');

    const huge = modulusOf(randomBytes(2049));
    expect(prepareWasmRsaKey(huge, Uint8Array.of(3))).toBeUndefined();
    const big = createRsaPublicOperation(huge, Uint8Array.of(3));
    expect(toBig(big.apply(Uint8Array.of(5)))).toBe(125n);
    expect(big.engine).toBe('bigint');
  });

  it('modPowBigInt (the BigInt fallback) agrees with the oracle, exponent 0 and modulus 1 included', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 1n << 300n }),
        fc.bigInt({ min: 0n, max: 1n << 40n }),
        fc.bigInt({ min: 1n, max: 1n << 300n }),
        (b, e, n) => {
          expect(modPowBigInt(b, e, n)).toBe(oracle(b, e, n));
        },
      ),
      { numRuns: 500 },
    );
    expect([
      modPowBigInt(5n, 0n, 7n),
      modPowBigInt(5n, 0n, 1n),
      modPowBigInt(5n, 3n, 1n),
      modPowBigInt(0n, 5n, 7n),
    ]).toEqual([1n, 0n, 0n, 0n]);
  });

  it("engine: 'bigint' forces BigInt, with the same answers", () => {
    const n = modulusOf(randomBytes(256));
    const viaWasm = createRsaPublicOperation(n, Uint8Array.of(1, 0, 1));
    const viaBig = createRsaPublicOperation(n, Uint8Array.of(1, 0, 1), { engine: 'bigint' });
    for (const s of edgeBases(toBig(n), 256))
      expect(viaBig.apply(toBytes(s, 256))).toEqual(viaWasm.apply(toBytes(s, 256)));
    expect([viaWasm.engine, viaBig.engine]).toEqual(['wasm', 'bigint']);
  });
});
