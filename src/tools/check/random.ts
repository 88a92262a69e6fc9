/**
 * A small seeded generator (mulberry32), so a check's generated values can be made
 * again from the seed its report prints. Not for anything secret.
 */
export class Random {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** A whole number in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** 32 random bits. */
  uint32(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }

  /** A bigint in [min, max]. */
  bigint(min: bigint, max: bigint): bigint {
    const span = max - min + 1n;
    let r = 0n;
    for (let bits = 0n; 1n << bits < span * 2n ** 32n; bits += 32n) r = (r << 32n) | BigInt(this.uint32());
    return min + (r % span);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(0, items.length - 1)]!;
  }

  /** A copy of `items` in a random order. */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }
}

/** A seed for a run that was given none. */
export function newSeed(): number {
  return globalThis.crypto.getRandomValues(new Uint32Array(1))[0]!;
}
