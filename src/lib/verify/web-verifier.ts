import { asciiBytes, prepareWebKey, sha256HexWeb, verifyRsaSha256Web, type WebPublicKeyInput } from '../crypto/web.js';
import { candidates, finish, noKeyVerifies, prepare, resolveOptions, type VerifiedDelivery, type VerifyOptionsBase } from './flow.js';
import type { HeadersInput } from './headers.js';
import { importKeys } from './key-list.js';

export interface WebVerifierOptions extends VerifyOptionsBase {
  /** The gateway's public key, or several during a rotation (valid if any verifies). */
  publicKey: WebPublicKeyInput | readonly WebPublicKeyInput[];
}

export interface WebVerifier {
  /** Verifies a raw body against its headers with WebCrypto; resolves to the delivery or rejects with a WebhookError. */
  verify(body: string | Uint8Array, headers: HeadersInput): Promise<VerifiedDelivery>;
}

export function createWebVerifierCore(options: WebVerifierOptions): WebVerifier {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with a publicKey');
  const keys = importKeys(options.publicKey, prepareWebKey);
  const modulusBytes = keys.map((k) => k.modulusBytes);
  const o = resolveOptions(options);
  return {
    async verify(body, headers) {
      const { doc, signature, keyIndexes } = prepare(body, headers, o, modulusBytes);
      let tried = 0;
      for (const { dialect, canonical } of candidates(doc, o.dialects)) {
        tried++;
        const digest = await sha256HexWeb(canonical);
        const message = asciiBytes(digest);
        for (const k of keyIndexes) {
          if (await verifyRsaSha256Web(await keys[k]!.imported, message, signature)) return finish(doc, o, dialect, k, digest);
        }
      }
      return noKeyVerifies(o, tried);
    },
  };
}
