import { describe, expect, it } from 'vitest';
import { canonicalize, parseJson } from '../../../src/index.js';
import { BodyMalformedError } from '../../../src/errors.js';

function malformed(body: string | Uint8Array, opts?: { maxDepth?: number }): BodyMalformedError {
  try {
    parseJson(body, opts);
  } catch (err) {
    expect(err).toBeInstanceOf(BodyMalformedError);
    return err as BodyMalformedError;
  }
  throw new Error('expected BodyMalformedError');
}

describe('parser errors name the byte offset', () => {
  it.each([
    ['', 0, 'unexpected end of input'],
    ['{"a":1,}', 7, 'expected a string key'],
    ['[1 2]', 3, "expected ',' or ']'"],
    ['{"a":1} x', 8, 'unexpected data after the JSON value'],
    ['{"é":01}', 7, "expected ',' or '}'"],
    ['"abc', 0, 'unterminated string'],
    ['["\u0001"]', 2, 'unescaped control character'],
    ['[1.]', 3, 'digit must follow the decimal point'],
    ['[NaN]', 1, 'expected a value'],
    ['{"a":1,"a":2}', 7, 'duplicate key "a"'],
    ['{"b":1,"a":2,"b":3}', 13, 'duplicate key "b"'],
  ])('%j -> byte %i', (body, offset, reason) => {
    const err = malformed(body);
    expect(err).toMatchObject({ code: 'BODY_MALFORMED', offset });
    expect(err.message).toContain(reason);
    expect(err.message).toContain(`byte ${offset}`);
  });

  it('counts bytes, not UTF-16 units', () => {
    // "😀" is 4 bytes and 2 UTF-16 units; é is 2 bytes.
    expect(malformed('["😀é", x]').offset).toBe(11);
  });

  it('rejects invalid UTF-8 at the first bad byte', () => {
    expect(malformed(new Uint8Array([0x5b, 0x22, 0x61, 0xc3, 0x28, 0x22, 0x5d])).offset).toBe(3);
    expect(malformed(new Uint8Array([0x22, 0xed, 0xa0, 0x80, 0x22])).message).toContain('invalid UTF-8');
  });

  it('rejects a UTF-8 BOM and raw lone surrogates in string input', () => {
    expect(malformed(new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d])).offset).toBe(0);
    expect(malformed('["a\ud800"]').offset).toBe(3);
  });
});

describe('nesting limit', () => {
  it('rejects 100,000 nested arrays without overflowing the stack', () => {
    const err = malformed('['.repeat(100_000));
    expect(err.offset).toBe(1000);
    expect(err.message).toContain('nesting deeper than the limit of 1000');
  });

  it('rejects a 100,000-deep object', () => {
    const body = '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000);
    expect(malformed(body).offset).toBe(5000);
  });

  it('accepts exactly the limit and honours a configured one', () => {
    const at = (n: number) => '['.repeat(n) + ']'.repeat(n);
    expect(() => parseJson(at(1000))).not.toThrow();
    expect(malformed(at(1001)).code).toBe('BODY_MALFORMED');
    expect(malformed(at(11), { maxDepth: 10 }).message).toContain('limit of 10');
    // The highest configurable limit parses and serializes without a stack overflow.
    const obj = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
    expect(canonicalize(at(2000), { maxDepth: 2000 }).length).toBeGreaterThan(2000);
    expect(canonicalize(obj(2000), { maxDepth: 2000, dialect: 'python' }).length).toBeGreaterThan(2000);
    expect(parseJson(obj(2000), { maxDepth: 2000 })).toBeTypeOf('object');
  });

  it('refuses a nonsensical limit with a TypeError', () => {
    expect(() => parseJson('[]', { maxDepth: 0 })).toThrow(TypeError);
    expect(() => parseJson('[]', { maxDepth: 1e9 })).toThrow(TypeError);
  });
});

describe('parseJson values', () => {
  it('keeps big integers exact in bigint and string modes', () => {
    const body = '{"a":18446744073709551615,"b":9007199254740993,"c":12,"d":1.5}';
    expect(parseJson(body, { integers: 'bigint' })).toEqual({
      a: 18446744073709551615n,
      b: 9007199254740993n,
      c: 12,
      d: 1.5,
    });
    expect(parseJson(body, { integers: 'string' })).toEqual({
      a: '18446744073709551615',
      b: '9007199254740993',
      c: 12,
      d: 1.5,
    });
    expect(parseJson(body)).toEqual({ a: 18446744073709551615, b: 9007199254740992, c: 12, d: 1.5 });
  });

  it('makes __proto__ an own property, never the prototype', () => {
    const v = parseJson('{"__proto__":{"polluted":true}}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.keys(v)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('gives the values JSON.parse gives (-0 stays -0), while the canonical text writes 0 and -0.0', () => {
    expect(Object.is(parseJson('-0.0'), -0)).toBe(true);
    expect(Object.is(parseJson('-0'), JSON.parse('-0'))).toBe(true);
    expect(canonicalize('[-0,-0.0]')).toBe('[\n  0,\n  -0.0\n]');
  });

  it('takes the exact path for large integers only in the exact modes, with the same other values', () => {
    const body = '{"a":[1.5,"x\\u00e9",true,null],"b":99999999999999999999}';
    const exact = parseJson(body, { integers: 'string' }) as { a: unknown[]; b: unknown };
    expect(exact.a).toEqual([1.5, 'xé', true, null]);
    expect(exact.b).toBe('99999999999999999999');
  });

  it('rejects a body that is neither string nor bytes', () => {
    expect(() => parseJson({} as unknown as string)).toThrow(TypeError);
  });
});

describe('duplicate keys in objects of any size and order (property)', () => {
  it('are always rejected at the byte offset of the later occurrence', async () => {
    const fc = (await import('fast-check')).default;
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ unit: 'grapheme', maxLength: 4 }), { minLength: 1, maxLength: 40 }),
        fc.nat(),
        fc.nat(),
        (keys, from, to) => {
          const dup = keys[from % keys.length]!;
          const members = keys.map((k, i) => `${JSON.stringify(k)}:${i}`);
          const at = (to % keys.length) + 1;
          if (at <= from % keys.length) return; // the copy must come after the original
          members.splice(at, 0, `${JSON.stringify(dup)}:"dup"`);
          const text = `{${members.join(',')}}`;
          const prefix = `{${members.slice(0, at).join(',')},`;
          const err = malformed(text);
          expect(err.offset).toBe(Buffer.byteLength(prefix));
          expect(err.message).toContain(`duplicate key ${JSON.stringify(dup)}`);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('unique keys in any order are accepted and come out sorted by code point', async () => {
    const fc = (await import('fast-check')).default;
    fc.assert(
      fc.property(
        fc.uniqueArray(
          fc.string({ unit: 'binary', maxLength: 3 }).filter((s) => s.isWellFormed()),
          { maxLength: 40 },
        ),
        (keys) => {
          const text = `{${keys.map((k, i) => `${JSON.stringify(k)}:${i}`).join(',')}}`;
          const byCodePoint = [...keys].sort((a, b) => {
            const x = [...a].map((c) => c.codePointAt(0)!);
            const y = [...b].map((c) => c.codePointAt(0)!);
            for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
            return x.length - y.length;
          });
          const out = canonicalize(text, { dialect: 'python' });
          const order = [...out.matchAll(/^ {2}("(?:[^"\\]|\\.)*"): /gm)].map(
            (m) => JSON.parse(m[1]!) as string,
          );
          expect(order).toEqual(byCodePoint);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('key order with lone surrogates (python dialect)', () => {
  it('keys sharing a lone high surrogate and differing after it are distinct, in code point order', () => {
    // Found by the differential test against the WebAssembly engine.
    const body = '{"\\ud800\\ud800":1,"\\ud800\\ufbbb":2,"\\ud800a":3}';
    expect(canonicalize(body, { dialect: 'python' })).toBe(
      '{\n  "\\ud800a": 3,\n  "\\ud800\\ud800": 1,\n  "\\ud800\\ufbbb": 2\n}',
    );
    // More than 16 members take the other sort path.
    const many = Array.from(
      { length: 20 },
      (_, k) => `"\\ud800\\u${(0xfb00 + k).toString(16)}":${k}`,
    ).reverse();
    const out = canonicalize(`{${many.join(',')},"\\ud800\\ud800":99}`, { dialect: 'python' });
    expect(out.indexOf('\\ud800\\ud800')).toBeLessThan(out.indexOf('\\ud800\\ufb00'));
    expect(out.indexOf('\\ud800\\ufb00')).toBeLessThan(out.indexOf('\\ud800\\ufb13'));
  });
});
