import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize, DIALECTS, parseJson } from '../../../src/index.js';

// JSON values with floats that exercise every layout (integral, tiny, huge, -0).
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.string({ unit: 'grapheme' }),
    fc.string({ unit: 'binary' }).filter((s) => s.isWellFormed()),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(
      fc.string({ unit: 'binary' }).filter((s) => s.isWellFormed()),
      tie('value'),
      { maxKeys: 5 },
    ),
  ),
})).value;

/** Writes a value as compact JSON text, keeping float-ness (1.0 stays a float) and bigints exact. */
function toText(v: unknown): string {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number')
    return Number.isInteger(v) && !Object.is(v, -0)
      ? `${v}.0`.replace('e+', 'e').replace(/e(-?\d+)\.0$/, 'e$1')
      : JSON.stringify(v) === '0'
        ? '-0.0'
        : JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(toText).join(',')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}:${toText(x)}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

describe('properties', () => {
  for (const dialect of DIALECTS) {
    it(`${dialect}: parse(canonicalize(x)) equals parse(x), and canonicalize is idempotent`, () => {
      fc.assert(
        fc.property(jsonValue, (v) => {
          const text = toText(v);
          const canon = canonicalize(text, { dialect });
          expect(parseJson(canon, { integers: 'bigint' })).toEqual(parseJson(text, { integers: 'bigint' }));
          expect(canonicalize(canon, { dialect })).toBe(canon);
        }),
        { numRuns: 400 },
      );
    });
  }
});
