import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { canonicalize, parseJson } from '../../../src/index.js';
import { fixture, readFixtureBytes } from '../../helpers/paths.js';

// JSONTestSuite (MIT, Nicolas Seriot), copied unchanged into fixtures/vectors/jsontestsuite.
const DIR = fixture('vectors', 'jsontestsuite', 'test_parsing');
const files = readdirSync(DIR).sort();

function outcome(file: string): 'accept' | 'reject' {
  const bytes = readFixtureBytes('vectors', 'jsontestsuite', 'test_parsing', file);
  try {
    parseJson(bytes);
    return 'accept';
  } catch (err) {
    // Anything but our own error is a crash.
    expect(err).toMatchObject({ code: 'BODY_MALFORMED', name: 'BodyMalformedError' });
    expect((err as { offset: number }).offset).toBeGreaterThanOrEqual(0);
    expect((err as { offset: number }).offset).toBeLessThanOrEqual(bytes.length);
    return 'reject';
  }
}

/**
 * y_ files that jobhook rejects on purpose: docs/protocol.md ("Canonical JSON") and the parser's contract
 * reject duplicate keys (no sender can emit them, and a receiver that kept the
 * first or the last could be tricked into acting on a value the signer did not mean).
 */
const Y_REJECTED = ['y_object_duplicated_key.json', 'y_object_duplicated_key_and_value.json'];

/**
 * Implementation-defined cases, decided:
 * - numbers that overflow/underflow binary64 are accepted (±Infinity / 0, as Python's json does);
 *   only the python dialects can write Infinity, orjson rejects it, so such bodies cannot carry an orjson signature;
 * - huge integers are accepted and kept exact;
 * - lone or mismatched surrogate *escapes* are accepted (Python json accepts them and its
 *   ensure_ascii output writes them back); they cannot verify under the UTF-8 dialects;
 * - every invalid UTF-8 byte sequence, UTF-16 input and a UTF-8 BOM are rejected: the body must be strict UTF-8;
 * - 500 nested arrays are within the default limit of 1,000.
 */
const I_DECISIONS: Record<string, 'accept' | 'reject'> = {
  'i_number_double_huge_neg_exp.json': 'accept',
  'i_number_huge_exp.json': 'accept',
  'i_number_neg_int_huge_exp.json': 'accept',
  'i_number_pos_double_huge_exp.json': 'accept',
  'i_number_real_neg_overflow.json': 'accept',
  'i_number_real_pos_overflow.json': 'accept',
  'i_number_real_underflow.json': 'accept',
  'i_number_too_big_neg_int.json': 'accept',
  'i_number_too_big_pos_int.json': 'accept',
  'i_number_very_big_negative_int.json': 'accept',
  'i_object_key_lone_2nd_surrogate.json': 'accept',
  'i_string_1st_surrogate_but_2nd_missing.json': 'accept',
  'i_string_1st_valid_surrogate_2nd_invalid.json': 'accept',
  'i_string_UTF-16LE_with_BOM.json': 'reject',
  'i_string_UTF-8_invalid_sequence.json': 'reject',
  'i_string_UTF8_surrogate_U+D800.json': 'reject',
  'i_string_incomplete_surrogate_and_escape_valid.json': 'accept',
  'i_string_incomplete_surrogate_pair.json': 'accept',
  'i_string_incomplete_surrogates_escape_valid.json': 'accept',
  'i_string_invalid_lonely_surrogate.json': 'accept',
  'i_string_invalid_surrogate.json': 'accept',
  'i_string_invalid_utf-8.json': 'reject',
  'i_string_inverted_surrogates_U+1D11E.json': 'accept',
  'i_string_iso_latin_1.json': 'reject',
  'i_string_lone_second_surrogate.json': 'accept',
  'i_string_lone_utf8_continuation_byte.json': 'reject',
  'i_string_not_in_unicode_range.json': 'reject',
  'i_string_overlong_sequence_2_bytes.json': 'reject',
  'i_string_overlong_sequence_6_bytes.json': 'reject',
  'i_string_overlong_sequence_6_bytes_null.json': 'reject',
  'i_string_truncated-utf-8.json': 'reject',
  'i_string_utf16BE_no_BOM.json': 'reject',
  'i_string_utf16LE_no_BOM.json': 'reject',
  'i_structure_500_nested_arrays.json': 'accept',
  'i_structure_UTF-8_BOM_empty_object.json': 'reject',
};

describe('JSONTestSuite', () => {
  it('has the 318 upstream files', () => {
    expect(files).toHaveLength(318);
  });

  it('accepts every y_ file but the two duplicate-key ones, which it rejects', () => {
    const y = files.filter((f) => f.startsWith('y_'));
    expect(y).toHaveLength(95);
    const rejected = y.filter((f) => outcome(f) === 'reject');
    expect(rejected).toEqual(Y_REJECTED);
  });

  it('rejects every n_ file', () => {
    const n = files.filter((f) => f.startsWith('n_'));
    expect(n).toHaveLength(188);
    expect(n.filter((f) => outcome(f) === 'accept')).toEqual([]);
  });

  it('decides every i_ file as documented', () => {
    const i = files.filter((f) => f.startsWith('i_'));
    expect(Object.keys(I_DECISIONS).sort()).toEqual(i);
    expect(Object.fromEntries(i.map((f) => [f, outcome(f)]))).toEqual(I_DECISIONS);
  });

  it('canonicalizes every accepted file without crashing in every dialect', () => {
    for (const f of files) {
      const bytes = readFixtureBytes('vectors', 'jsontestsuite', 'test_parsing', f);
      if (outcome(f) === 'reject') continue;
      for (const dialect of ['orjson', 'orjson-legacy', 'python-utf8', 'python'] as const) {
        try {
          expect(typeof canonicalize(bytes, { dialect })).toBe('string');
        } catch (err) {
          expect(err).toMatchObject({ code: 'CANONICAL_UNREPRESENTABLE' });
        }
      }
    }
  });
});
