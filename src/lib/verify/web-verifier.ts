import { constantTimeEqual } from '../crypto/pkcs1.js';
import { prepareWebKey, sha256HexWeb, sha256OfHexWeb, type WebPublicKeyInput } from '../crypto/web.js';
import { boundedSink, candidateDialects, finish, matchOpened, noDialectMatches, parseBody, type CanonicalChunk, type ParsedBody, type VerifiedDelivery } from './core.js';
import type { HeadersInput } from './headers.js';
import { importKeys } from './key-list.js';
import { resolveOptions, type ResolvedOptions, type VerifyOptionsBase } from './options.js';
import { noKeyOpens, readSignature, type Opened } from './signature.js';

export interface WebVerifierOptions extends VerifyOptionsBase {
  /** The gateway's public key, or several during a rotation (valid if any verifies). */
  publicKey: WebPublicKeyInput | readonly WebPublicKeyInput[];
}

export interface WebVerifier {
  /** Verifies a raw body against its headers with WebCrypto; resolves to the delivery or rejects with a WebhookError. */
  verify(body: string | Uint8Array, headers: HeadersInput): Promise<VerifiedDelivery>;
}

/** The verifier with its resolved options, for the receivers built on it. */
export interface WebVerifierCore extends WebVerifier {
  readonly options: ResolvedOptions;
}

const encoder = new TextEncoder();

/**
 * The canonical bytes of one dialect. WebCrypto has no incremental hash, so they are
 * held whole, one dialect at a time (bounded by maxCanonicalBytes).
 */
function canonicalBytes(body: ParsedBody, dialect: Parameters<ParsedBody['write']>[0], limit: number): Uint8Array {
  const chunks: CanonicalChunk[] = [];
  body.write(dialect, boundedSink(limit, (chunk) => chunks.push(typeof chunk === 'string' ? chunk : chunk.slice())));
  if (chunks.every((c) => typeof c === 'string')) return encoder.encode((chunks as string[]).join(''));
  const parts = chunks.map((c) => (typeof c === 'string' ? encoder.encode(c) : c));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

export function createWebVerifierCore(options: WebVerifierOptions): WebVerifierCore {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with a publicKey');
  const keys = importKeys(options.publicKey, prepareWebKey);
  const modulusBytes = keys.map((k) => k.modulusBytes);
  const o = resolveOptions(options);
  return {
    options: o,
    async verify(body, headers) {
      const { signature, keyIndexes } = readSignature(body, headers, o, modulusBytes);
      const opened: Opened[] = [];
      for (const k of keyIndexes) {
        const hash = await keys[k]!.open(signature);
        if (hash !== undefined) opened.push({ keyIndex: k, hash });
      }
      if (opened.length === 0) throw noKeyOpens(keyIndexes.length);
      const parsed = parseBody(body, o);
      try {
        const digests: string[] = [];
        for (const dialect of candidateDialects(parsed.flags, o.dialects)) {
          const digest = await sha256HexWeb(canonicalBytes(parsed, dialect, o.maxCanonicalBytes));
          if (digests.includes(digest)) continue;
          digests.push(digest);
          const match = matchOpened(opened, await sha256OfHexWeb(digest), constantTimeEqual);
          if (match !== undefined) return finish(parsed, o, dialect, match.keyIndex, digest);
        }
        throw noDialectMatches(parsed, o, opened, digests.length);
      } finally {
        parsed.dispose();
      }
    },
  };
}
