import crypto from 'node:crypto';
import { importNodeKey, sha256Hex, sha256OfHex, type NodePublicKeyInput } from '../crypto/node.js';
import { rsaOperation } from '../crypto/rsa-probe.js';
import type { DialectName } from '../../core/canonical/dialects.js';
import {
  boundedSink,
  drive,
  matching,
  opening,
  verification,
  type OpenedSignature,
  type Step,
  type VerifiedDelivery,
  type ParsedBody,
} from '../../core/verify/core.js';
import type { HeadersInput } from '../../core/verify/headers.js';
import {
  ASYNC_KEY_REFUSED,
  isAsyncFunction,
  keyRing,
  type KeyInput,
  type PublicKeySource,
} from '../../core/verify/key-list.js';
import { loadWasmEngine } from '../../core/canonical/wasm/lazy.js';
import { nodeBuiltins } from './node-threads.js';
import type { VerifyRuntime } from './offload.js';
import {
  resolveOptions,
  VERIFY_OPTIONS,
  type ResolvedOptions,
  type VerifyOptionsBase,
} from '../../core/verify/options.js';
import type { OptionNamesOf } from '../../base/options.js';

export interface VerifierOptions extends VerifyOptionsBase {
  /**
   * The gateway's public key, or several during a rotation (valid if any verifies), or a
   * function that returns them, called at the first verification (and its result kept):
   * a key that exists only at run time. `verify` is synchronous, so the function must be
   * too; the receivers and `jobhook/web` also take an async one.
   */
  publicKey: KeyInput<NodePublicKeyInput> | (() => KeyInput<NodePublicKeyInput>);
}

/** The options of the Node receivers and middleware: their key function may be async. */
export interface NodeVerifierOptions extends VerifyOptionsBase {
  /**
   * The gateway's public key, or several during a rotation (valid if any verifies), or a
   * function (sync or async) that gives them at the first delivery, so the key is not
   * needed at build time. Its result is kept; a call that throws, rejects or gives an
   * unusable key fails that delivery with 500 (the gateway retries) and a log line, and
   * the function is called again at the next delivery.
   */
  publicKey: PublicKeySource<NodePublicKeyInput>;
}

export interface Verifier {
  /** Verifies a raw body against its headers; returns the delivery or throws a WebhookError. */
  verify(body: string | Uint8Array, headers: HeadersInput): VerifiedDelivery;
  /**
   * Resolves once the fast canonical engine (WebAssembly) is loaded, or known not to run
   * here. `verify` works before, with the JavaScript engine (the same bytes, about half
   * as fast on large bodies): a script or test that verifies in a loop right after
   * `createVerifier` awaits this first, since the engine loads on a later turn of the
   * event loop.
   */
  ready(): Promise<void>;
}

/** The verifier with its resolved options, for the receivers built on it. */
export interface NodeVerifierCore extends Verifier {
  readonly options: ResolvedOptions;
  /**
   * The first half, on the headers alone: a signature that opened, or a 401 WebhookError.
   * Synchronous once the keys are in hand; a promise while a key function is resolved.
   */
  open(headers: HeadersInput): OpenedSignature | Promise<OpenedSignature>;
  /** The second half: the body against a signature `open` returned (`parsed`: the body parsed already, which it disposes). */
  verifyOpened(body: string | Uint8Array, signature: OpenedSignature, parsed?: ParsedBody): VerifiedDelivery;
}

/**
 * Buffer's hex decoding, for ASCII only: Buffer reads a character by its low byte (it
 * would decode "š", U+0161, as "a"), so anything else decodes to nothing (malformed).
 */
const decodeHex = (hex: string): Uint8Array =>
  Buffer.byteLength(hex, 'utf8') === hex.length ? Buffer.from(hex, 'hex') : new Uint8Array(0);

/** Lowercase hex SHA-256 of a canonical form, streamed: the text is never held whole. */
function hashCanonical(body: ParsedBody, dialect: DialectName, limit: number): string {
  let hex: string | undefined;
  let hash: crypto.Hash | undefined;
  body.write(
    dialect,
    boundedSink(limit, (chunk, last) => {
      // Most bodies are one chunk: a one-shot hash, no Hash object, no copy.
      if (last && hash === undefined) hex = sha256Hex(chunk);
      else {
        (hash ??= crypto.createHash('sha256')).update(chunk);
        if (last) hex = hash.digest('hex');
      }
    }),
  );
  return hex!;
}

/**
 * The signature's key among those in flight and known (receive/guard.ts `digestKey`, the
 * same text), made at once with Buffer's hex: one flat string, not 34 concatenations
 * flattened again when the Map hashes it.
 */
function withKey(signature: OpenedSignature): OpenedSignature {
  let key = '';
  for (const { keyIndex, hash } of signature.opened)
    key += `${keyIndex}:${Buffer.from(hash.buffer, hash.byteOffset, hash.byteLength).toString('hex')};`;
  signature.key = key;
  return signature;
}

/** The steps of matching a body, on node:crypto (no keys: the signature was opened already); the verification workers run these. */
export function matchingSteps(o: ResolvedOptions): (step: Step) => unknown {
  return (step) => {
    if (step.op === 'digest') return hashCanonical(step.body, step.dialect, o.maxCanonicalBytes);
    if (step.op === 'hashOfDigest') return sha256OfHex(step.digest);
    throw new Error('a signature is opened on the main thread, not here');
  };
}

/** A Node verifier from its options (TypeError for mistakes). */
export function createNodeVerifier(options: NodeVerifierOptions): NodeVerifierCore {
  if (typeof options !== 'object' || options === null)
    throw new TypeError('options must be an object with a publicKey');
  return nodeVerifier(options.publicKey, resolveOptions(options));
}

/** The node:crypto verifier of `publicKey`, over options resolved once (a receiver's). */
export function nodeVerifier(
  publicKey: PublicKeySource<NodePublicKeyInput>,
  o: ResolvedOptions,
): NodeVerifierCore {
  // Probed here too so a runtime without a working RSA operation is named as such, not as a bad publicKey[0].
  rsaOperation();
  // The WebAssembly canonical engine, loaded now: the first delivery finds it ready.
  void loadWasmEngine();
  const ring = keyRing(publicKey, importNodeKey);
  const perform = (step: Step): unknown => {
    switch (step.op) {
      case 'open':
        // Steps come only from flows started with the keys in hand.
        return ring.ready!.imported[step.keyIndex]!.open(step.signature);
      case 'digest':
        return hashCanonical(step.body, step.dialect, o.maxCanonicalBytes);
      case 'hashOfDigest':
        return sha256OfHex(step.digest);
    }
  };
  const open = (modulusBytes: readonly number[], headers: HeadersInput) =>
    withKey(drive(opening(headers, o, modulusBytes, decodeHex), perform));
  return {
    options: o,
    verify: (body, headers) =>
      drive(verification(body, headers, o, ring.getSync().modulusBytes, decodeHex), perform),
    ready: () => loadWasmEngine().then(() => undefined),
    open: (headers) =>
      ring.ready !== undefined
        ? open(ring.ready.modulusBytes, headers)
        : ring.get().then((keys) => open(keys.modulusBytes, headers)),
    verifyOpened: (body, signature, parsed) =>
      drive(matching(body, signature, o, undefined, parsed), perform),
  };
}

/**
 * The verifier of `createVerifier` from `jobhook`: synchronous, so an async key function
 * is refused at construction (and one that returns a promise, at its first call).
 */
export function createSyncVerifier(options: VerifierOptions): Verifier {
  if (typeof options === 'object' && options !== null && isAsyncFunction(options.publicKey))
    throw new TypeError(ASYNC_KEY_REFUSED);
  const { verify, ready } = createNodeVerifier(options);
  return { verify, ready };
}

/** `createVerifier` from `jobhook` (and `verifyWebhook`). */
export const VERIFIER_OPTIONS = {
  ...VERIFY_OPTIONS,
  publicKey: true,
} as const satisfies OptionNamesOf<VerifierOptions> & OptionNamesOf<NodeVerifierOptions>;

/** Node's runtime for the receivers: node:crypto, worker threads by import(). */
export const NODE_RUNTIME: VerifyRuntime<NodePublicKeyInput> = {
  verifier: nodeVerifier,
  hashRaw: sha256Hex,
  builtins: () => nodeBuiltins,
};
