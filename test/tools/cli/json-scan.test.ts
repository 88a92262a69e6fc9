/**
 * The CLI's JSON scanner (src/tools/cli/json-scan.ts) takes what JSON.parse takes and
 * refuses what it refuses, on generated documents and on their mutations; the values it
 * decodes are JSON.parse's; its nesting is bounded.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonScan, JsonScanError } from '../../../src/tools/cli/json-scan.js';

const encoder = new TextEncoder();

/** Whether the scanner takes `text` as one JSON value (surrounded by whitespace at most). */
function scans(text: string, maxDepth = 1000): boolean {
  const scan = new JsonScan(encoder.encode(text), maxDepth);
  try {
    scan.skip();
    scan.end();
    return true;
  } catch (err) {
    if (err instanceof JsonScanError) return false;
    throw err;
  }
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const documents = fc.jsonValue({ maxDepth: 6 }).map((v) => JSON.stringify(v, null, 1));

describe('JsonScan', () => {
  it('takes every JSON document, and what JSON.parse takes after a byte is changed, inserted or removed', () => {
    const bytes = ' \t\n{}[]":,.-+eE0123456789tfnulrsa\\/bu'.split('');
    fc.assert(
      fc.property(
        documents,
        fc.nat(),
        fc.constantFrom(...bytes),
        fc.constantFrom('replace', 'insert', 'remove'),
        (text, at, byte, how) => {
          expect(scans(text)).toBe(true);
          const k = text.length === 0 ? 0 : at % text.length;
          const mutated =
            how === 'replace'
              ? text.slice(0, k) + byte + text.slice(k + 1)
              : how === 'insert'
                ? text.slice(0, k) + byte + text.slice(k)
                : text.slice(0, k) + text.slice(k + 1);
          expect(scans(mutated), JSON.stringify(mutated)).toBe(parses(mutated));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('refuses what JSON.parse refuses at the edges: controls in strings, bad escapes, numbers, trailing data', () => {
    for (const text of [
      '"a\u0001"',
      '"\\x"',
      '"\\u12"',
      '01',
      '1.',
      '.5',
      '1e',
      '-',
      '[1,]',
      '{"a":1,}',
      '{"a"}',
      '{1:2}',
      'tru',
      'nul',
      '[1] 2',
      '',
      '"abc',
      '[',
    ])
      expect(scans(text), JSON.stringify(text)).toBe(false);
    for (const text of ['-0', '1E+2', '0.5e-3', '"\\u00e9\\n\\/"', ' [ ] ', '{"":{}}'])
      expect(scans(text)).toBe(true);
  });

  it('decodes the members it is asked for as JSON.parse does, and skips the others', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 })), (object) => {
        const scan = new JsonScan(encoder.encode(JSON.stringify(object)), 1000);
        // A Map: a member may be named __proto__.
        const seen = new Map<string, unknown>();
        scan.members((name) => {
          const span = scan.skip();
          const value: unknown = JSON.parse(
            new TextDecoder().decode(scan.bytes.subarray(span.start, span.end)),
          );
          seen.set(name, value);
          if (scan.kind(span) === 0x22) expect(scan.text(span)).toBe(value);
        });
        expect([...seen]).toEqual(Object.entries(JSON.parse(JSON.stringify(object)) as object));
      }),
    );
  });

  it('nests at most maxDepth levels, whatever the document, with a stack of maxDepth bytes', () => {
    expect(scans('[[[]]]', 3)).toBe(true);
    expect(scans('[[[[]]]]', 3)).toBe(false);
    expect(scans('{"a":{"b":[{}]}}', 4)).toBe(true);
    expect(scans('{"a":{"b":[{"c":1}]}}', 3)).toBe(false);
    const deep = '['.repeat(5_000_000) + ']'.repeat(5_000_000);
    expect(() => new JsonScan(encoder.encode(deep), 1000).skip()).toThrow(
      /^Nesting deeper than 1000 levels at byte 1000$/,
    );
  });
});
