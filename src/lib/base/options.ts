/** Option checks shared by every public constructor: one rule, one wording. */

export interface NumberRule {
  /** Smallest accepted value (default 1). */
  min?: number;
  /** Largest accepted value (default: none). */
  max?: number;
  /** Whole numbers only. */
  integer?: boolean;
}

/** The number `value` when it satisfies `rule`, else a TypeError naming the option. */
export function checkNumber(value: unknown, what: string, rule: NumberRule = {}): number {
  const min = rule.min ?? 1;
  const max = rule.max ?? Number.MAX_VALUE;
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value >= min &&
    value <= max &&
    (!rule.integer || Number.isInteger(value));
  if (!ok) {
    const range = max === Number.MAX_VALUE ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new TypeError(
      `${what} must be ${rule.integer ? 'an integer' : 'a number'} ${range}; got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`,
    );
  }
  return value;
}

/** `checkNumber` for an optional option: `fallback` when undefined. */
export function optionalNumber(value: unknown, what: string, fallback: number, rule?: NumberRule): number {
  return value === undefined ? fallback : checkNumber(value, what, rule);
}

/** A duration in whole milliseconds (fractions rounded up), at least 1. */
export function checkMs(value: unknown, what: string): number {
  return Math.ceil(checkNumber(value, what));
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Whether `value` is an HTTP header name (an RFC 9110 token). */
export function isHeaderName(value: unknown): value is string {
  return typeof value === 'string' && HEADER_NAME.test(value);
}

/** An HTTP header name (RFC 9110 token), or `fallback` when undefined. */
export function headerName(value: unknown, what: string, fallback: string): string {
  if (value === undefined) return fallback;
  if (!isHeaderName(value))
    throw new TypeError(`${what} must be an HTTP header name; got ${JSON.stringify(value)}`);
  return value;
}

/** The option names a constructor takes. */
export type OptionNames = Readonly<Record<string, true>>;

/**
 * Every key of `T`, no other: the type of an options list kept beside its interface
 * (`export const X_OPTIONS = { … } as const satisfies OptionNamesOf<XOptions>`), so that
 * `npm run typecheck` fails until a name added to the interface is listed, and a listed
 * name must exist in it. A misspelt option (`maxBodyByte`) is then refused at
 * construction with the nearest name (`checkOptionNames`) instead of being ignored.
 */
export type OptionNamesOf<T> = { readonly [K in keyof Required<T>]: true };

/**
 * TypeError for the first option name that `known` lacks, naming the nearest known one:
 * a misspelt option (`maxBodyByte`) would otherwise be ignored without a word. Anything
 * that is not an object is left to the constructor's own check.
 */
export function checkOptionNames(options: unknown, known: OptionNames): void {
  if (typeof options !== 'object' || options === null) return;
  for (const name of Object.keys(options)) {
    if (Object.hasOwn(known, name)) continue;
    const names = Object.keys(known);
    const near = nearestName(name, names);
    throw new TypeError(
      `unknown option ${name}; ${near === undefined ? `the options are ${names.join(', ')}` : `did you mean ${near}?`}`,
    );
  }
}

/** The known name closest to `name`: a few edits away (any case), or the one name it is a part of (`lease` → `leaseMs`). */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  if (bestDistance <= Math.ceil(name.length / 3)) return best;
  const containing = lower.length >= 3 ? known.filter((k) => k.toLowerCase().includes(lower)) : [];
  return containing.length === 1 ? containing[0] : undefined;
}

/** Edits (insert, delete, replace, swap two neighbours) from `a` to `b`: optimal string alignment. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const up = rows[i - 1]!;
      let d = Math.min(up[j]! + 1, row[j - 1]! + 1, up[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}
