import { createPublicKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { importNodeKey, verifyRsaSha256 } from '../../src/lib/crypto/node.js';
import { prepareWebKey, verifyRsaSha256Web } from '../../src/lib/crypto/web.js';
import { decodeSignature } from '../../src/lib/verify/flow.js';
import { readFixture } from '../helpers/paths.js';

// Project Wycheproof (Apache-2.0), copied unchanged into fixtures/vectors/wycheproof.
interface WycheproofTest {
  tcId: number;
  comment: string;
  flags: string[];
  msg: string;
  sig: string;
  result: 'valid' | 'invalid' | 'acceptable';
}
interface WycheproofGroup {
  keySize: number;
  publicKeyDer: string;
  publicKeyPem: string;
  publicKeyAsn: string;
  keyJwk: { kty: 'RSA'; n: string; e: string; alg?: string; kid?: string };
  tests: WycheproofTest[];
}

const hex = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));

function keyFormsOf(g: WycheproofGroup): Record<string, Parameters<typeof importNodeKey>[0]> {
  return {
    'DER SPKI': hex(g.publicKeyDer),
    'PEM SPKI': g.publicKeyPem,
    'DER PKCS#1': hex(g.publicKeyAsn),
    'PEM PKCS#1': `-----BEGIN RSA PUBLIC KEY-----\n${Buffer.from(g.publicKeyAsn, 'hex').toString('base64')}\n-----END RSA PUBLIC KEY-----\n`,
    JWK: g.keyJwk,
  };
}

/**
 * "acceptable" in these files is only MissingNull (a DigestInfo without the NULL
 * parameter). jobhook decides: reject. OpenSSL's strict encoding comparison does,
 * and no gateway signature omits the NULL, so accepting it would only widen the
 * set of accepted encodings.
 */
const ACCEPTABLE_DECISION = false;

function expectation(t: WycheproofTest): boolean {
  if (t.result === 'acceptable') {
    expect(t.flags).toContain('MissingNull');
    return ACCEPTABLE_DECISION;
  }
  return t.result === 'valid';
}

/** The hex/length check against the key: the signature bytes, or undefined when it rejects them. */
function decoded(sigHex: string, modulusBytes: number): Uint8Array | undefined {
  try {
    return decodeSignature(sigHex, [modulusBytes]).signature;
  } catch (err) {
    expect(err).toMatchObject({ code: 'SIGNATURE_MALFORMED' });
    return undefined;
  }
}

/** jobhook's signature layer on Node: hex/length check against the key, then verify. */
function nodeLayer(key: ReturnType<typeof importNodeKey>, msg: Uint8Array, sigHex: string): boolean {
  const sig = decoded(sigHex, key.modulusBytes);
  return sig !== undefined && verifyRsaSha256(key.key, msg, sig);
}

async function webLayer(key: ReturnType<typeof prepareWebKey>, msg: Uint8Array, sigHex: string): Promise<boolean> {
  const sig = decoded(sigHex, key.modulusBytes);
  return sig !== undefined && verifyRsaSha256Web(await key.imported, msg, sig);
}

for (const bits of [2048, 3072, 4096, 8192]) {
  const file = JSON.parse(readFixture('vectors', 'wycheproof', `rsa_signature_${bits}_sha256_test.json`)) as { testGroups: WycheproofGroup[]; numberOfTests: number };
  describe(`Wycheproof RSASSA-PKCS1-v1_5 SHA-256, ${bits}-bit`, () => {
    const total = file.testGroups.reduce((n, g) => n + g.tests.length, 0);
    it('has every test of the file', () => {
      expect(total).toBe(file.numberOfTests);
    });

    it('node:crypto path: 0 wrong answers with every key form', () => {
      const wrong: string[] = [];
      let checked = 0;
      for (const g of file.testGroups) {
        for (const [form, input] of Object.entries(keyFormsOf(g))) {
          const key = importNodeKey(input);
          expect(key.modulusBytes * 8).toBe(g.keySize);
          for (const t of g.tests) {
            checked++;
            if (nodeLayer(key, hex(t.msg), t.sig) !== expectation(t)) wrong.push(`${form} tc${t.tcId} ${t.comment}`);
          }
        }
        // A KeyObject the caller imported is the sixth form.
        const key = importNodeKey(createPublicKey(g.publicKeyPem));
        for (const t of g.tests) if (nodeLayer(key, hex(t.msg), t.sig) !== expectation(t)) wrong.push(`KeyObject tc${t.tcId}`);
      }
      expect(checked).toBe(total * 5);
      expect(wrong).toEqual([]);
    });

    it('WebCrypto path: 0 wrong answers with every key form', async () => {
      const wrong: string[] = [];
      for (const g of file.testGroups) {
        for (const [form, input] of Object.entries(keyFormsOf(g))) {
          const key = prepareWebKey(input as Parameters<typeof prepareWebKey>[0]);
          for (const t of g.tests) {
            if ((await webLayer(key, hex(t.msg), t.sig)) !== expectation(t)) wrong.push(`${form} tc${t.tcId} ${t.comment}`);
          }
        }
      }
      expect(wrong).toEqual([]);
    });
  });
}
