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
