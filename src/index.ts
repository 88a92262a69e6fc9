/**
 * jobhook: verify the RSA-signed `async_job_completed` webhooks of an AI gateway.
 * @packageDocumentation
 */
import { canonicalizeBytes, canonicalizeText, parseJsonValue, type CanonicalizeOptions, type ParseJsonOptions } from './lib/canonical/index.js';
import type { JsonValue } from './lib/canonical/to-value.js';

export { DIALECTS, type DialectName } from './lib/canonical/dialects.js';
export type { IntegerMode, JsonValue } from './lib/canonical/to-value.js';
export type { CanonicalizeOptions, ParseJsonOptions } from './lib/canonical/index.js';
export * from './lib/errors.js';

/**
 * Rebuilds the canonical text the gateway signed from a raw body: sorted keys,
 * 2-space indent, floats and escapes exactly as the dialect's serializer writes them.
 *
 * @example
 * ```ts
 * import { canonicalize } from 'jobhook';
 * canonicalize('{"b":1.0,"a":[1e16]}');
 * // '{\n  "a": [\n    1e+16\n  ],\n  "b": 1.0\n}'
 * canonicalize(rawBytes, { dialect: 'python' });
 * ```
 * @throws BodyMalformedError when the body is not strict JSON (the error has the byte offset).
 * @throws CanonicalUnrepresentableError when the dialect cannot write the payload.
 */
export function canonicalize(body: string | Uint8Array, options?: CanonicalizeOptions): string {
  return canonicalizeText(body, options);
}

/**
 * Same as {@link canonicalize}, as UTF-8 bytes (what is hashed).
 *
 * @example
 * ```ts
 * const bytes = canonicalizeToBytes(rawBody, { dialect: 'orjson' });
 * ```
 */
export function canonicalizeToBytes(body: string | Uint8Array, options?: CanonicalizeOptions): Uint8Array {
  return canonicalizeBytes(body, options);
}

/**
 * Strict RFC 8259 parse to plain JS values, rejecting what `JSON.parse` lets
 * through (duplicate keys, invalid UTF-8, excessive nesting), with an exact
 * option for large integers.
 *
 * @example
 * ```ts
 * parseJson('{"n": 18446744073709551615}', { integers: 'bigint' });
 * // { n: 18446744073709551615n }
 * ```
 */
export function parseJson(body: string | Uint8Array, options?: ParseJsonOptions): JsonValue {
  return parseJsonValue(body, options);
}
