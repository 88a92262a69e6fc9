/**
 * Why a body is malformed, as `BodyMalformedError` says it. The JS parser (parse.ts,
 * utf8.ts) and the WebAssembly engine (wasm/engine.ts, from the reason codes of
 * native/canonical.c) both write their messages from here: they must say the same
 * (test/core/canonical/differential.test.ts).
 */
import { quoted } from '../../base/text.js';

export const MALFORMED = {
  invalidUtf8: 'invalid UTF-8',
  loneSurrogate: 'lone surrogate in the text (it cannot be encoded as UTF-8)',
  valueEnd: 'unexpected end of input, expected a value',
  minusSign: 'invalid number: a digit must follow the minus sign',
  decimalPoint: 'invalid number: a digit must follow the decimal point',
  exponentMark: 'invalid number: a digit must follow the exponent mark',
  unicodeEscape: 'invalid \\u escape: four hex digits expected',
  unterminatedString: 'unterminated string',
  invalidEscape: 'invalid escape in string',
  controlCharacter: 'unescaped control character in string',
  arrayEnd: 'unexpected end of input in an array',
  objectEnd: 'unexpected end of input in an object',
  stringKey: 'expected a string key',
  colon: "expected ':' after an object key",
  trailingData: 'unexpected data after the JSON value',
} as const;

/** What was expected where an unexpected character stood. */
export type Expected = 'a value' | "',' or ']'" | "',' or '}'";

/** An unexpected UTF-16 code unit `c` (the first of a surrogate pair for an astral character). */
export function unexpectedCharacter(c: number, expected: Expected): string {
  const what =
    c >= 0x21 && c <= 0x7e
      ? `'${String.fromCharCode(c)}'`
      : `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
  return `unexpected character ${what}, expected ${expected}`;
}

export function invalidLiteral(word: 'true' | 'false' | 'null'): string {
  return `invalid literal, expected ${word}`;
}

export function nestingTooDeep(maxDepth: number): string {
  return `nesting deeper than the limit of ${maxDepth}`;
}

export function duplicateKey(key: string): string {
  return `duplicate key ${quoted(key)}`;
}
