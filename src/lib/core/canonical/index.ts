import { assertDialect, type DialectName } from './dialects.js';
import { parseDocument, resolveMaxDepth, type ParseOptions } from './parse.js';
import { wasmEngine } from './wasm/lazy.js';
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

const decoder = new TextDecoder();

/** Canonical bytes from the WebAssembly engine, or undefined where it cannot load. */
function wasmBytes(
  body: string | Uint8Array,
  dialect: DialectName,
  options?: CanonicalizeOptions,
): Uint8Array | undefined {
  const engine = wasmEngine();
  if (engine === undefined) return undefined;
  const doc = engine.parse(body, { maxDepth: resolveMaxDepth(options?.maxDepth) });
  try {
    return doc.bytes(dialect);
  } finally {
    doc.dispose();
  }
}

export function canonicalizeText(body: string | Uint8Array, options?: CanonicalizeOptions): string {
  const dialect = options?.dialect === undefined ? 'orjson' : assertDialect(options.dialect);
  const bytes = wasmBytes(body, dialect, options);
  return bytes !== undefined
    ? decoder.decode(bytes)
    : serializeDocument(parseDocument(body, options), dialect);
}

export function canonicalizeBytes(body: string | Uint8Array, options?: CanonicalizeOptions): Uint8Array {
  const dialect = options?.dialect === undefined ? 'orjson' : assertDialect(options.dialect);
  return (
    wasmBytes(body, dialect, options) ?? encodeUtf8(serializeDocument(parseDocument(body, options), dialect))
  );
}

export function parseJsonValue(body: string | Uint8Array, options?: ParseJsonOptions): JsonValue {
  const integers = assertIntegerMode(options?.integers);
  return documentValue(parseDocument(body, options), integers);
}
