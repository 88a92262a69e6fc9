/** The canonical-JSON dialects, in the order a verifier tries them (docs/protocol.md, "Canonical JSON"). */
export const DIALECTS = ['orjson', 'orjson-legacy', 'python-utf8', 'python'] as const;

/** One of {@link DIALECTS}. */
export type DialectName = (typeof DIALECTS)[number];

export function isDialectName(value: unknown): value is DialectName {
  return typeof value === 'string' && (DIALECTS as readonly string[]).includes(value);
}

export function assertDialect(value: unknown, what = 'dialect'): DialectName {
  if (!isDialectName(value)) {
    throw new TypeError(`${what} must be one of ${DIALECTS.join(', ')}; got ${JSON.stringify(value)}`);
  }
  return value;
}
