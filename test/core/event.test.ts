/**
 * finished_at is read on every delivery by a character-by-character parser; it must give
 * exactly what the regular-expression parser it replaced gave (kept here as the oracle),
 * for generated date-times, near-misses and garbage.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseRfc3339 } from '../../src/lib/core/event.js';

/** The parser before it was rewritten for speed (jobhook 0.1.0's), as the oracle. */
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;
const leap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
function oracle(text: unknown): number | undefined {
  if (typeof text !== 'string') return undefined;
  const m = RFC3339.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((k) => Number(m[k])) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const days = new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !leap(year) ? 1 : 0);
  if (month < 1 || month > 12 || day < 1 || day > days || hour > 23 || minute > 59 || second > 60)
    return undefined;
  let offset = 0;
  if (m[8] === undefined) {
    const [oh, om] = [Number(m[10]), Number(m[11])];
    if (oh > 23 || om > 59) return undefined;
    offset = (m[9] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, Math.min(second, 59), 0);
  const fraction = m[7] === undefined ? 0 : Number(`0${m[7]}`) * 1000;
  return date.getTime() + (second === 60 ? 999.999 : fraction) - offset;
}

const pad = (n: number, w: number) => String(n).padStart(w, '0');
const dateTime = fc
  .record({
    year: fc.integer({ min: 0, max: 9999 }),
    month: fc.integer({ min: 0, max: 13 }),
    day: fc.integer({ min: 0, max: 32 }),
    hour: fc.integer({ min: 0, max: 25 }),
    minute: fc.integer({ min: 0, max: 61 }),
    second: fc.integer({ min: 0, max: 61 }),
    t: fc.constantFrom('T', 't', ' ', 'x'),
    fraction: fc.option(fc.stringMatching(/^[0-9]{0,9}$/)),
    zone: fc.oneof(
      fc.constantFrom('Z', 'z', '', 'Z ', '+0000'),
      fc
        .tuple(fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 25 }), fc.integer({ min: 0, max: 61 }))
        .map(([s, h, m]) => `${s}${pad(h, 2)}:${pad(m, 2)}`),
    ),
  })
  .map(
    (d) =>
      `${pad(d.year, 4)}-${pad(d.month, 2)}-${pad(d.day, 2)}${d.t}${pad(d.hour, 2)}:${pad(d.minute, 2)}:${pad(d.second, 2)}${d.fraction === null ? '' : `.${d.fraction}`}${d.zone}`,
  );

describe('parseRfc3339', () => {
  it('gives what the regular-expression parser gave, for date-times, near-misses and garbage', () => {
    fc.assert(
      fc.property(dateTime, (text) => {
        expect(parseRfc3339(text)).toBe(oracle(text));
      }),
      { numRuns: 20_000 },
    );
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.string({ unit: fc.constantFrom(...'0123456789-:TZ+.t ') })),
        (text) => {
          expect(parseRfc3339(text)).toBe(oracle(text));
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('reads the usual forms', () => {
    expect(parseRfc3339('2026-11-21T10:00:05Z')).toBe(Date.UTC(2026, 10, 21, 10, 0, 5));
    expect(parseRfc3339('2026-11-21T10:00:05.123456+02:00')).toBe(Date.UTC(2026, 10, 21, 8, 0, 5) + 123.456);
    expect(parseRfc3339('2024-02-29t23:59:60z')).toBe(Date.UTC(2024, 1, 29, 23, 59, 59) + 999.999);
    expect(parseRfc3339('0099-01-01T00:00:00Z')).toBe(oracle('0099-01-01T00:00:00Z'));
    for (const bad of [
      '2025-02-29T00:00:00Z',
      '2026-11-21',
      '2026-11-21T10:00:05',
      '2026-11-21T10:00:05.Z',
      42,
      undefined,
    ])
      expect(parseRfc3339(bad)).toBeUndefined();
  });
});
