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
  const ok = typeof value === 'number' && Number.isFinite(value) && value >= min && value <= max && (!rule.integer || Number.isInteger(value));
  if (!ok) {
    const range = max === Number.MAX_VALUE ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new TypeError(`${what} must be ${rule.integer ? 'an integer' : 'a number'} ${range}; got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`);
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

/** An HTTP header name (RFC 9110 token), or `fallback` when undefined. */
export function headerName(value: unknown, what: string, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !HEADER_NAME.test(value)) throw new TypeError(`${what} must be an HTTP header name; got ${JSON.stringify(value)}`);
  return value;
}
