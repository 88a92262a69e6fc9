import { prepareWebKey, sha256HexWeb, sha256OfHexWeb, type WebPublicKeyInput } from '../crypto/web.js';
import type { DialectName } from '../../core/canonical/dialects.js';
import { concatBytes } from '../../base/bytes.js';
import {
  boundedSink,
  driveAsync,
  matching,
  opening,
  verification,
  type CanonicalChunk,
  type OpenedSignature,
  type ParsedBody,
  type Step,
  type VerifiedDelivery,
} from '../../core/verify/core.js';
import type { HeadersInput } from '../../core/verify/headers.js';
import { keyRing, type PublicKeySource } from '../../core/verify/key-list.js';
import { loadWasmEngine } from '../../core/canonical/wasm/lazy.js';
import { runtimeBuiltins } from './runtime-threads.js';
import type { VerifyRuntime } from './offload.js';
import {
  resolveOptions,
  VERIFY_OPTIONS,
  type ResolvedOptions,
  type VerifyOptionsBase,
} from '../../core/verify/options.js';
import type { OptionNamesOf } from '../../base/options.js';

export interface WebVerifierOptions extends VerifyOptionsBase {
  /**
   * The gateway's public key, or several during a rotation (valid if any verifies), or a
   * function (sync or async) that gives them at the first verification, so the key is
   * not needed at build time (Next.js, a Worker's `env`). Its result is kept; a call that
   * throws, rejects or gives an unusable key fails that verification (the receiver
   * answers 500, so the gateway retries, and logs it) and is made again at the next one.
   */
  publicKey: PublicKeySource<WebPublicKeyInput>;
}

export interface WebVerifier {
  /** Verifies a raw body against its headers with WebCrypto; resolves to the delivery or rejects with a WebhookError. */
  verify(body: string | Uint8Array, headers: HeadersInput): Promise<VerifiedDelivery>;
  /**
   * Resolves once the keys are imported and the fast canonical engine (WebAssembly) is
   * loaded, or known not to run here; rejects as `verify` would for a key that cannot be
   * used. `verify` works before, with the JavaScript engine for the canonical form.
   */
  ready(): Promise<void>;
}

/** The verifier with its resolved options, for the receivers built on it. */
export interface WebVerifierCore extends WebVerifier {
  readonly options: ResolvedOptions;
  /** The first half, on the headers alone: a signature that opened, or a 401 WebhookError. */
  open(headers: HeadersInput): Promise<OpenedSignature>;
  /** The second half: the body against a signature `open` returned (`parsed`: the body parsed already, which it disposes). */
  verifyOpened(
    body: string | Uint8Array,
    signature: OpenedSignature,
    parsed?: ParsedBody,
  ): Promise<VerifiedDelivery>;
}

const encoder = new TextEncoder();

/**
 * The canonical bytes of one dialect. WebCrypto has no incremental hash, so they are
 * held whole, one dialect at a time (bounded by maxCanonicalBytes).
 */
function canonicalBytes(body: ParsedBody, dialect: DialectName, limit: number): Uint8Array {
  const chunks: CanonicalChunk[] = [];
  body.write(
    dialect,
    boundedSink(limit, (chunk) => void chunks.push(typeof chunk === 'string' ? chunk : chunk.slice())),
  );
  if (chunks.every((c) => typeof c === 'string')) return encoder.encode((chunks as string[]).join(''));
  return concatBytes(chunks.map((c) => (typeof c === 'string' ? encoder.encode(c) : c)));
}

/** A WebCrypto verifier from its options (TypeError for mistakes). */
export function createWebVerifierCore(options: WebVerifierOptions): WebVerifierCore {
  if (typeof options !== 'object' || options === null)
    throw new TypeError('options must be an object with a publicKey');
  return webVerifier(options.publicKey, resolveOptions(options));
}

/** The WebCrypto verifier of `publicKey`, over options resolved once (a receiver's). */
export function webVerifier(
  publicKey: PublicKeySource<WebPublicKeyInput>,
  o: ResolvedOptions,
): WebVerifierCore {
  // The WebAssembly canonical engine, loaded now: the first delivery finds it ready.
  void loadWasmEngine();
  const ring = keyRing(publicKey, prepareWebKey);
  const perform = (step: Step): unknown => {
    switch (step.op) {
      case 'open':
        // Steps come only from flows started with the keys in hand.
        return ring.ready!.imported[step.keyIndex]!.open(step.signature);
      case 'digest':
        return sha256HexWeb(canonicalBytes(step.body, step.dialect, o.maxCanonicalBytes));
      case 'hashOfDigest':
        return sha256OfHexWeb(step.digest);
    }
  };
  const modulusBytes = async () => (ring.ready ?? (await ring.get())).modulusBytes;
  return {
    options: o,
    verify: async (body, headers) =>
      driveAsync(verification(body, headers, o, await modulusBytes()), perform),
    ready: async () => {
      await Promise.all([loadWasmEngine(), modulusBytes()]);
    },
    open: async (headers) => driveAsync(opening(headers, o, await modulusBytes()), perform),
    verifyOpened: (body, signature, parsed) =>
      driveAsync(matching(body, signature, o, undefined, parsed), perform),
  };
}

/** `createVerifier` from `jobhook/web`. */
export const WEB_VERIFIER_OPTIONS = {
  ...VERIFY_OPTIONS,
  publicKey: true,
} as const satisfies OptionNamesOf<WebVerifierOptions>;

/**
 * The Fetch runtimes' for the receivers: WebCrypto (or the runtime's node:crypto where a
 * probe shows it works); on Node itself, the same worker threads as the Node receivers.
 */
export const WEB_RUNTIME: VerifyRuntime<WebPublicKeyInput> = {
  verifier: webVerifier,
  hashRaw: sha256HexWeb,
  builtins: runtimeBuiltins,
};
