/** One key or several (rotation) as a non-empty list. */
export function keyList<K>(publicKey: K | readonly K[] | undefined): readonly K[] {
  if (publicKey === undefined || publicKey === null) throw new TypeError('publicKey is required');
  const list = Array.isArray(publicKey) ? (publicKey as readonly K[]) : [publicKey as K];
  if (list.length === 0) throw new TypeError('publicKey must hold at least one key');
  return list;
}
