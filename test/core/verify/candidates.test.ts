import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DIALECTS, type DialectName } from '../../../src/index.js';
import { parseDocument } from '../../../src/lib/core/canonical/parse.js';
import { serializeDocument, unrepresentableReason } from '../../../src/lib/core/canonical/serialize.js';
import { candidateDialects } from '../../../src/lib/core/verify/core.js';

/** The reference: serialize every dialect and drop byte-identical repeats by comparing text. */
function byText(body: string): DialectName[] {
  const doc = parseDocument(body);
  const seen: string[] = [];
  const out: DialectName[] = [];
  for (const d of DIALECTS) {
    if (unrepresentableReason(doc, d) !== undefined) continue;
    const text = serializeDocument(doc, d);
    if (seen.includes(text)) continue;
    seen.push(text);
    out.push(d);
  }
  return out;
}

/** What the verifiers hash: the flags' candidates, repeats then dropped by digest (here: by text). */
function viaFlags(body: string): DialectName[] {
  const doc = parseDocument(body);
  const seen = new Set<string>();
  return candidateDialects(doc, DIALECTS).filter((d) => {
    const text = serializeDocument(doc, d);
    if (seen.has(text)) return false;
    seen.add(text);
    return true;
  });
}

describe('dialect candidates', () => {
  it.each([
    ['ASCII, integers and as-written floats: one candidate', '{"a":[1,0.5,1.0,"x"]}', ['orjson']],
    ['non-ASCII: python differs', '{"a":"é","b":1.0}', ['orjson', 'python']],
    ['1e16 alone: orjson and Python both write 1e+16', '{"a":1e16}', ['orjson', 'orjson-legacy']],
    ['1e16 and 1e-5: three float layouts', '{"a":[1e16,1e-5]}', ['orjson', 'orjson-legacy', 'python-utf8']],
    [
      'three float layouts and non-ASCII: four',
      '{"a":[1e16,1e-5],"b":"é"}',
      ['orjson', 'orjson-legacy', 'python-utf8', 'python'],
    ],
    ['a lone surrogate: python only', '{"a":"\\ud800"}', ['python']],
  ])('%s', (_l, body, want) => {
    expect(viaFlags(body)).toEqual(want);
    expect(byText(body)).toEqual(want);
  });

  it('the flags alone spare the serializations of the usual bodies', () => {
    expect(candidateDialects(parseDocument('{"a":[1,0.5,1.0,"x"]}'), DIALECTS)).toEqual(['orjson']);
    expect(candidateDialects(parseDocument('{"a":"é","b":1.0}'), DIALECTS)).toEqual(['orjson', 'python']);
  });

  it('the flags never skip a dialect that text comparison would keep (property)', () => {
    const token = fc.oneof(
      fc.constantFrom(
        '1',
        '-0',
        '0.5',
        '1.0',
        '1e16',
        '1e-7',
        '0.00001',
        '123456789012345678901',
        '1.5e300',
        '"é"',
        '"\\u007f"',
        '"x"',
        'true',
        'null',
        '"\\ud83d\\ude00"',
      ),
      fc.double({ noNaN: true, noDefaultInfinity: true }).map((v) => (Object.is(v, -0) ? '-0.0' : String(v))),
    );
    fc.assert(
      fc.property(fc.array(token, { maxLength: 6 }), (tokens) => {
        const body = `[${tokens.join(',')}]`;
        expect(viaFlags(body)).toEqual(byText(body));
      }),
      { numRuns: 500 },
    );
  });
});
