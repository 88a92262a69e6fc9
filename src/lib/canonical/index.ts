import { assertDialect, type DialectName } from './dialects.js';
import { parseDocument, type ParseOptions } from './parse.js';
import { serializeDocument } from './serialize.js';
import { assertIntegerMode, documentValue, type IntegerMode, type JsonValue } from './to-value.js';
import { encodeUtf8 } from './utf8.js';

export interface CanonicalizeOptions extends ParseOptions {
  /** Dialect to write (default `orjson`). */
  dialect?: DialectName;
}

export interface ParseJsonOptions extends ParseOptions {
  /** How integers beyond ±(2^53 − 1) come back: `number` (default, may round), `bigint` or `string` (exact). */
  integers?: IntegerMode;
}

export function canonicalizeText(body: string | Uint8Array, options?: CanonicalizeOptions): string {
  const dialect = options?.dialect === undefined ? 'orjson' : assertDialect(options.dialect);
  return serializeDocument(parseDocument(body, options), dialect);
}

export function canonicalizeBytes(body: string | Uint8Array, options?: CanonicalizeOptions): Uint8Array {
  return encodeUtf8(canonicalizeText(body, options));
}

export function parseJsonValue(body: string | Uint8Array, options?: ParseJsonOptions): JsonValue {
  const integers = assertIntegerMode(options?.integers);
  return documentValue(parseDocument(body, options), integers);
}
