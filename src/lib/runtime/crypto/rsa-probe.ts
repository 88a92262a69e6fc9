/**
 * Which RSA public operation the Node entries use, found out once per process by
 * opening a known signature (capabilities probed, not assumed). node:crypto's
 * `publicDecrypt` without padding is the fast one, but not every runtime's node:crypto
 * has it: Deno throws `Unknown padding`, and taking that for a forged signature answered
 * every genuine delivery 401. The fallback is the runtime-neutral public operation on the
 * key's n and e (exported as JWK): WebAssembly where it compiles, BigInt otherwise
 * (rsa-public.ts, loaded only when the probe picks it: rsa-deferred.ts), synchronous
 * like the first, so the verifier's API stays synchronous and a forged request still
 * costs exactly one RSA operation.
 */
import crypto, { type KeyObject } from 'node:crypto';
import { expectedPrefix, hashFromBlock } from '../../core/crypto/pkcs1.js';
import { deferredRsaPublicOperation } from './rsa-deferred.js';

/** The raw public operation on one key: `signature^e mod n` as `modulusBytes` big-endian bytes (may throw). */
export type RawRsa = (signature: Uint8Array) => Uint8Array;

/** One way to run the RSA public operation. */
export interface RsaOperation {
  readonly name: 'publicDecrypt' | 'modPow';
  /** Prepares a key once; throws when this runtime cannot. */
  prepare(key: KeyObject, modulusBytes: number): RawRsa;
}

/** node:crypto (OpenSSL, or the runtime's stand-in for it). */
export const PUBLIC_DECRYPT: RsaOperation = {
  name: 'publicDecrypt',
  prepare(key) {
    // Called through the module object (not a bound import) so tests can count RSA operations.
    return (signature) => crypto.publicDecrypt({ key, padding: crypto.constants.RSA_NO_PADDING }, signature);
  },
};

/** The runtime-neutral public operation (WebAssembly once loaded, else BigInt) on n and e read from the key's JWK export. */
export const MOD_POW: RsaOperation = {
  name: 'modPow',
  prepare(key, modulusBytes) {
    const jwk = key.export({ format: 'jwk' }) as { n?: unknown; e?: unknown };
    if (typeof jwk.n !== 'string' || typeof jwk.e !== 'string')
      throw new TypeError('the key exported as JWK lacks n or e');
    const operation = deferredRsaPublicOperation(
      Buffer.from(jwk.n, 'base64url'),
      Buffer.from(jwk.e, 'base64url'),
    );
    if (operation.modulusBytes > modulusBytes)
      throw new RangeError("the key's modulus is longer than its stated size");
    return (signature) => {
      const out = operation.apply(signature);
      if (out.length === modulusBytes) return out;
      const padded = new Uint8Array(modulusBytes);
      padded.set(out, modulusBytes - out.length);
      return padded;
    };
  },
};

/** The candidates, fastest first. */
export const RSA_OPERATIONS: readonly RsaOperation[] = [PUBLIC_DECRYPT, MOD_POW];

/**
 * The probe's known answer. TEST-ONLY material: the public key is
 * fixtures/keys/test-2048-public.der (a key whose private half is published with the
 * tests, so it protects nothing), and the signature is RSASSA-PKCS1-v1_5 / SHA-256 by
 * fixtures/keys/test-2048-private.pem over PROBE_MESSAGE. test/runtime/crypto/rsa-probe.test.ts
 * holds both equal to the fixtures.
 */
export const PROBE_MESSAGE = 'jobhook: RSA public operation probe';
export const PROBE_PUBLIC_KEY_SPKI =
  'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAxlFssBhr+RicjyCr9GALPAltEWiyCiUGHie3Y/17N9zvueOL2UOp/kE+d8oGeC/yorUWEeu2Cp9KCifcKBaFw8MWnA2CTISXZnstEzId699BCAj8m4Rv0KC0xfxp5HhR3FbBTX0WvrfOgMWsxLZ+7ryMydfhNV2ZFOYs9gZ2M39z9TGL8AxR69TSBKRBoTs4QX8JRk7Fw4hZfwfwJRrt2BtWHm9M5Z8T4ROiSN3wlNjKqRxsmhpJ8OlUFJ/DSPoGn5davJnc0m9XOPJ7aCg5B1zKqu+X2WxLzk81EgkMlg3yYFNZg0FJBVGlL/D4FRrlOWjHwwOK8+J83qGVh5sCDQIDAQAB';
export const PROBE_SIGNATURE =
  'KMaM0TuFUo4rTON2DybzMd9d6q/GEiG3PrlcrkMzroUSRXQhjdwOqy/bwrX4HcHPf2mcv2xhPMQuWydUQDT7MDDQzIhEHD8372gKa9eJ+Is+BpzOKbPpeDUmAUAOqWzp7w5lHY+S/JG9DqvsgErKW0bursHK/ZRevpn6u22hwFN9ZWl/yN86LW6qs902wtwAOITecaNPBBb7h09lFyJku9t/zEXDKdOzS6V47KA4DPbV1BGLDbPdlYGSAdYmNHSv+IhHUPl48O3JfwNfUCBxRxcSE8sgWyNfkER0X23HlPNI/Q56fMUXj9ds+edjjcMb1q9Ye0xFEbFBjE/tC2ik6A==';

const PROBE_MODULUS_BYTES = 256;

/** Why `operation` fails the probe, or undefined when it opens the known signature right (and refuses it one bit off). */
function failure(operation: RsaOperation): string | undefined {
  try {
    const key = crypto.createPublicKey({
      key: Buffer.from(PROBE_PUBLIC_KEY_SPKI, 'base64'),
      format: 'der',
      type: 'spki',
    });
    const raw = operation.prepare(key, PROBE_MODULUS_BYTES);
    const prefix = expectedPrefix(PROBE_MODULUS_BYTES);
    const signature = new Uint8Array(Buffer.from(PROBE_SIGNATURE, 'base64'));
    const expected = crypto.createHash('sha256').update(PROBE_MESSAGE).digest();
    const opened = hashFromBlock(raw(signature), prefix);
    if (opened === undefined || !expected.equals(opened))
      return 'it opened a known signature to the wrong block';
    signature[signature.length - 1]! ^= 1;
    const bent = hashFromBlock(raw(signature), prefix);
    if (bent !== undefined && expected.equals(bent))
      return 'it opened a signature one bit off to the right block';
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * The first candidate that opens the known signature right. TypeError naming
 * `jobhook/web` (WebCrypto, which needs none of this) when none does.
 */
export function probeRsaOperation(candidates: readonly RsaOperation[] = RSA_OPERATIONS): RsaOperation {
  const reasons: string[] = [];
  for (const candidate of candidates) {
    const why = failure(candidate);
    if (why === undefined) return candidate;
    reasons.push(`${candidate.name}: ${why}`);
  }
  throw new TypeError(
    `jobhook's Node entries cannot verify signatures in this runtime: no RSA public operation opens a known signature (${reasons.join('; ')}). ` +
      "Use createReceiver or createVerifier from 'jobhook/web' (WebCrypto) instead.",
  );
}

let chosen: RsaOperation | undefined;

/** The operation for this process: probed at the first call (the first key import), then kept. */
export function rsaOperation(): RsaOperation {
  return (chosen ??= probeRsaOperation());
}
