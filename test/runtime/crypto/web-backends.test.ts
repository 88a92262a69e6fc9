import crypto, { createHash, createPrivateKey, sign, webcrypto } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createVerifier as createWebVerifier } from '../../../src/web.js';
import {
  builtinCrypto,
  builtinSha256,
  type BuiltinCrypto,
} from '../../../src/lib/runtime/crypto/builtin-crypto.js';
import { wasmRsaLoaded } from '../../../src/lib/runtime/crypto/rsa-wasm.js';
import {
  prepareWebKey,
  sha256HexSubtle,
  sha256HexWeb,
  sha256OfHexWeb,
} from '../../../src/lib/runtime/crypto/web.js';
import { deliveries, keyForms, privatePem, publicPem } from '../../helpers/keys.js';

// How jobhook/web picks its RSA backend: node:crypto where a probe on the key passes,
// else WebAssembly, else BigInt. (Each test file runs in its own process, so "not
// loaded" below means not loaded by anything this file did first.)

const now = () => Date.parse('2026-11-21T10:05:00Z');
const pub = publicPem(2048);

/** H of a genuine signature over the hex digest `digestHex`: what open() must return. */
const hOf = (digestHex: string) => new Uint8Array(createHash('sha256').update(digestHex).digest());

/** A genuine signature (the 2048-bit test key) over the hex digest of `text`, and the H open() must return for it. */
function genuine(text = 'some canonical bytes'): { sig: Uint8Array; h: Uint8Array } {
  const digestHex = createHash('sha256').update(text).digest('hex');
  return {
    sig: new Uint8Array(sign('sha256', Buffer.from(digestHex), createPrivateKey(privatePem(2048)))),
    h: hOf(digestHex),
  };
}

/** As a plain Uint8Array (node:crypto hands out Buffers), for comparisons. */
const plain = (bytes: Uint8Array | undefined) => (bytes === undefined ? undefined : new Uint8Array(bytes));

/** node:crypto with publicDecrypt replaced, as a runtime whose implementation differs. */
function withPublicDecrypt(publicDecrypt: BuiltinCrypto['publicDecrypt']): BuiltinCrypto {
  return { ...(crypto as unknown as BuiltinCrypto), publicDecrypt };
}

describe('jobhook/web on Node: node:crypto, reached without an import', () => {
  afterEach(() => vi.restoreAllMocks());

  it('verifies every fixture delivery through node:crypto and never loads the WebAssembly RSA module', async () => {
    expect(builtinCrypto()).toBe(crypto);
    const web = createWebVerifier({ publicKey: [publicPem(3072), pub, publicPem(4096)], now });
    for (const d of deliveries()) expect((await web.verify(d.body, d.headers)).jobId).toBe(d.jobId);
    expect(wasmRsaLoaded()).toBe(false);
  });

  it('every key form gets the node-crypto backend', () => {
    for (const [form, input] of Object.entries(keyForms(2048)))
      expect(prepareWebKey(input).backend(), form).toBe('node-crypto');
  });

  it('a forged signature costs one RSA operation per key of its size, after one probe per key at construction', async () => {
    const decrypt = vi.spyOn(crypto, 'publicDecrypt');
    const web = createWebVerifier({ publicKey: [pub, publicPem(3072)], now });
    expect(decrypt).toHaveBeenCalledTimes(2); // the probes
    decrypt.mockClear();
    await expect(
      web.verify('{"not": "even read"}', { 'X-Service-Signature': '01'.repeat(256) }),
    ).rejects.toMatchObject({ code: 'SIGNATURE_INVALID' });
    expect(decrypt).toHaveBeenCalledTimes(1);
  });

  it('a CryptoKey is probed at its first open (its numbers come from an asynchronous export)', async () => {
    const cryptoKey = await webcrypto.subtle.importKey(
      'spki',
      keyForms(2048)['DER SPKI'],
      { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
      true,
      ['verify'],
    );
    const key = prepareWebKey(cryptoKey);
    expect(key.backend()).toBeUndefined();
    const { sig, h } = genuine();
    expect(plain(await key.open(sig))).toEqual(h);
    expect(key.backend()).toBe('node-crypto');
  });

  it('SHA-256 through node:crypto equals WebCrypto’s, for bytes and for the hex text', async () => {
    expect(builtinSha256()).toBeDefined();
    for (const size of [0, 1, 55, 56, 64, 1400, 100_000]) {
      const data = new Uint8Array(crypto.randomBytes(size));
      const hex = await sha256HexWeb(data);
      expect(hex).toBe(await sha256HexSubtle(data));
      expect(plain(await sha256OfHexWeb(hex))).toEqual(
        new Uint8Array(await webcrypto.subtle.digest('SHA-256', new TextEncoder().encode(hex))),
      );
    }
  });
});

describe('a runtime whose node:crypto cannot do it gets WebAssembly (the probe, not an assumption)', () => {
  const { sig, h } = genuine();

  it('publicDecrypt without RSA_NO_PADDING (Deno): WebAssembly, and it opens', async () => {
    const denoLike = withPublicDecrypt((options, buffer) => {
      if (options.padding === crypto.constants.RSA_NO_PADDING) throw new TypeError('Unsupported padding');
      return crypto.publicDecrypt(options as crypto.RsaPublicKey, buffer);
    });
    const key = prepareWebKey(pub, { nodeCrypto: denoLike });
    expect(key.backend()).toBe('wasm');
    expect(plain(await key.open(sig))).toEqual(h);
    expect(key.backend()).toBe('wasm');
  });

  it('publicDecrypt that answers wrong (a broken implementation): WebAssembly', async () => {
    const wrong = withPublicDecrypt((options, buffer) => {
      const out = crypto.publicDecrypt(options as crypto.RsaPublicKey, buffer);
      out[out.length - 1]! ^= 1;
      return out;
    });
    const key = prepareWebKey(pub, { nodeCrypto: wrong });
    expect(key.backend()).toBe('wasm');
    expect(plain(await key.open(sig))).toEqual(h);
  });

  it('no node:crypto at all (browsers, Workers without nodejs_compat): WebAssembly, compiled at the first open', async () => {
    const key = prepareWebKey(pub, { nodeCrypto: null });
    expect(key.backend()).toBe('wasm');
    expect(plain(await key.open(sig))).toEqual(h);
    expect(wasmRsaLoaded()).toBe(true);
    // Forgeries: not below the modulus, below it but not a signature, the wrong length.
    expect(await key.open(new Uint8Array(256).fill(0xff))).toBeUndefined();
    expect(await key.open(new Uint8Array(256).fill(0x01))).toBeUndefined();
    expect(await key.open(sig.subarray(1))).toBeUndefined();
  });

  it('another message’s genuine signature opens to its own H, not this one', async () => {
    const key = prepareWebKey(pub, { backend: 'wasm' });
    const other = genuine('other canonical bytes');
    expect(plain(await key.open(other.sig))).toEqual(other.h);
    expect(other.h).not.toEqual(h);
  });
});
