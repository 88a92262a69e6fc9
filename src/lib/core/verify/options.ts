import { DIALECTS, assertDialect, type DialectName } from '../canonical/dialects.js';
import { resolveMaxDepth } from '../canonical/parse.js';
import { assertIntegerMode, type IntegerMode } from '../canonical/to-value.js';
import { headerName, optionalNumber, type OptionNamesOf } from '../../base/options.js';
import {
  DEFAULT_ALGORITHM_HEADER,
  DEFAULT_CANONICAL_EXPANSION,
  DEFAULT_MAX_AGE_SECONDS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_FUTURE_SKEW_SECONDS,
  DEFAULT_SIGNATURE_HEADER,
  DEFAULT_WEBHOOK_HEADER,
} from '../../base/protocol.js';

/**
 * The names of the gateway's headers, renamable for a gateway whose vendor prefix differs
 * (`X-Acme-Signature`). The one shape of every option list that renames them: the
 * verifier's and the receivers' take the two they read, the signer's and the tools' all of
 * them. A new header is added here, with its default in {@link DEFAULT_HEADER_NAMES}, then
 * where it is resolved (`resolveOptions` below, for the verifier) and read; the signer
 * writes it, and the tools follow the list.
 */
export interface HeaderNameOptions {
  /** Signature header name, any case (default `X-Service-Signature`). */
  signatureHeader?: string;
  /** Hash-algorithm header name, any case (default `X-Service-Hash-Algorithm`). When present it must say SHA256. */
  algorithmHeader?: string;
  /** Name of the `X-Service-Webhook: true` header (default `X-Service-Webhook`). */
  webhookHeader?: string;
}

/** Each header's name when its option is not given. */
export const DEFAULT_HEADER_NAMES: Readonly<Required<HeaderNameOptions>> = Object.freeze({
  signatureHeader: DEFAULT_SIGNATURE_HEADER,
  algorithmHeader: DEFAULT_ALGORITHM_HEADER,
  webhookHeader: DEFAULT_WEBHOOK_HEADER,
} satisfies Required<HeaderNameOptions>);

/** The names of {@link HeaderNameOptions}, for the option lists that take them all. */
export const HEADER_NAME_OPTIONS = Object.freeze(
  Object.fromEntries(Object.keys(DEFAULT_HEADER_NAMES).map((name) => [name, true])),
) as OptionNamesOf<HeaderNameOptions>;

/** Options every verifier takes, whatever the crypto backend; of the header names, the two it reads. */
export interface VerifyOptionsBase extends Pick<HeaderNameOptions, 'signatureHeader' | 'algorithmHeader'> {
  /** Dialects to try, in order (default: all four). Byte-identical candidates are tried once. */
  dialects?: readonly DialectName[];
  /** Largest body accepted, in bytes (default 25 MiB). */
  maxBodyBytes?: number;
  /**
   * Largest canonical text built, in bytes (default 4 × `maxBodyBytes`). Real deliveries
   * expand about 2×; deeply nested input can expand 1,000×. Checked before any canonical
   * text is built, and only once the signature has opened with a key.
   */
  maxCanonicalBytes?: number;
  /**
   * Replay window: refuse events whose signed `finished_at` is older than this many
   * seconds (default 86,400 = 24 h). `false` turns the window off (a tool reading old
   * captures); the receivers refuse a window longer than their `retainMs`.
   */
  maxAgeSeconds?: number | false;
  /**
   * With the replay window on: refuse events whose signed `finished_at` is more than this
   * many seconds ahead of this machine's clock (default 300), `EVENT_FROM_FUTURE` (401).
   * The receivers keep a completion mark until the later of `finished_at` and receipt
   * plus `maxAgeSeconds` plus this skew, so a replay inside the window of any receiver
   * whose clock is off by up to this much is always a duplicate.
   */
  maxFutureSkewSeconds?: number;
  /** How integers beyond ±(2^53 − 1) appear in the event (default `number`). */
  integers?: IntegerMode;
  /** Nesting limit of the JSON parser (default 1,000, at most 2,000). */
  maxDepth?: number;
  /** Clock for `maxAgeSeconds`, in epoch milliseconds (default `Date.now`). */
  now?: () => number;
}

export interface ResolvedOptions {
  dialects: DialectName[];
  /** Lower-case, for lookups. */
  signatureHeader: string;
  /** As configured, for messages. */
  signatureHeaderName: string;
  algorithmHeader: string;
  maxBodyBytes: number;
  maxCanonicalBytes: number;
  maxAgeSeconds: number | undefined;
  maxFutureSkewSeconds: number;
  integers: IntegerMode;
  maxDepth: number;
  now: () => number;
}

export function resolveOptions(options: VerifyOptionsBase): ResolvedOptions {
  const dialects =
    options.dialects === undefined
      ? [...DIALECTS]
      : [...options.dialects].map((d) => assertDialect(d, 'dialects[]'));
  if (dialects.length === 0) throw new TypeError('dialects must name at least one dialect');
  const signatureHeader = headerName(options.signatureHeader, 'signatureHeader', DEFAULT_SIGNATURE_HEADER);
  const maxBodyBytes = optionalNumber(options.maxBodyBytes, 'maxBodyBytes', DEFAULT_MAX_BODY_BYTES);
  if (options.now !== undefined && typeof options.now !== 'function')
    throw new TypeError('now must be a function returning epoch milliseconds');
  return {
    dialects,
    signatureHeader: signatureHeader.toLowerCase(),
    signatureHeaderName: signatureHeader,
    algorithmHeader: headerName(
      options.algorithmHeader,
      'algorithmHeader',
      DEFAULT_ALGORITHM_HEADER,
    ).toLowerCase(),
    maxBodyBytes,
    maxCanonicalBytes: optionalNumber(
      options.maxCanonicalBytes,
      'maxCanonicalBytes',
      DEFAULT_CANONICAL_EXPANSION * maxBodyBytes,
    ),
    maxAgeSeconds:
      options.maxAgeSeconds === false
        ? undefined
        : optionalNumber(options.maxAgeSeconds, 'maxAgeSeconds', DEFAULT_MAX_AGE_SECONDS),
    maxFutureSkewSeconds: optionalNumber(
      options.maxFutureSkewSeconds,
      'maxFutureSkewSeconds',
      DEFAULT_MAX_FUTURE_SKEW_SECONDS,
      { min: 0 },
    ),
    integers: assertIntegerMode(options.integers),
    maxDepth: resolveMaxDepth(options.maxDepth),
    now: options.now ?? Date.now,
  };
}

/**
 * TypeError unless every accepted delivery is still remembered by the store when a
 * replay could come: the replay window must be on and no longer than the retention.
 */
export function checkReplayWindow(maxAgeSeconds: number | undefined, retainMs: number): void {
  if (maxAgeSeconds === undefined) {
    throw new TypeError(
      'maxAgeSeconds: false leaves no replay window: a captured delivery replayed after retainMs would run the handler again; a receiver needs one',
    );
  }
  if (maxAgeSeconds * 1000 > retainMs) {
    throw new TypeError(
      `maxAgeSeconds (${maxAgeSeconds} s) is longer than retainMs (${retainMs} ms): a delivery replayed after its completion mark expired would run the handler again; shorten maxAgeSeconds or lengthen retainMs`,
    );
  }
}

/** The names of {@link VerifyOptionsBase}. */
export const VERIFY_OPTIONS = {
  dialects: true,
  signatureHeader: true,
  algorithmHeader: true,
  maxBodyBytes: true,
  maxCanonicalBytes: true,
  maxAgeSeconds: true,
  maxFutureSkewSeconds: true,
  integers: true,
  maxDepth: true,
  now: true,
} as const satisfies OptionNamesOf<VerifyOptionsBase>;
