import crypto from 'node:crypto';
import express from 'express';
import request from 'supertest';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  MOD_POW,
  PROBE_MESSAGE,
  PROBE_PUBLIC_KEY_SPKI,
  PROBE_SIGNATURE,
  PUBLIC_DECRYPT,
  probeRsaOperation,
  rsaOperation,
} from '../../../src/lib/runtime/crypto/rsa-probe.js';
import { deliveries, publicPem } from '../../helpers/keys.js';
import { readFixtureBytes } from '../../helpers/paths.js';

// The fixtures finished at 2026-11-21T10:00:05Z: a clock inside the replay window.
const now = () => Date.parse('2026-11-21T10:05:00Z');
/** Where `export` lives for public KeyObjects (a subclass of KeyObject). */
const publicKeyPrototype = () =>
  Object.getPrototypeOf(crypto.createPublicKey(publicPem(2048))) as { export: () => unknown };
const unknownPadding = () => {
  throw new Error('Unknown padding');
};

afterEach(() => {
  vi.restoreAllMocks();
  vi.resetModules();
});

describe('the RSA operation probe', () => {
  it('its known answer is the TEST-ONLY 2048-bit key of fixtures/keys and a signature that key made over the message', () => {
    expect(
      Buffer.from(PROBE_PUBLIC_KEY_SPKI, 'base64').equals(readFixtureBytes('keys', 'test-2048-public.der')),
    ).toBe(true);
    expect(
      crypto.verify(
        'sha256',
        Buffer.from(PROBE_MESSAGE),
        publicPem(2048),
        Buffer.from(PROBE_SIGNATURE, 'base64'),
      ),
    ).toBe(true);
  });

  it('picks node:crypto publicDecrypt on Node', () => {
    expect(rsaOperation()).toBe(PUBLIC_DECRYPT);
    expect(probeRsaOperation()).toBe(PUBLIC_DECRYPT);
  });

  it("falls back to modPow where publicDecrypt throws (Deno: 'Unknown padding')", () => {
    vi.spyOn(crypto, 'publicDecrypt').mockImplementation(unknownPadding);
    expect(probeRsaOperation()).toBe(MOD_POW);
  });

  it('falls back where publicDecrypt answers with a wrong block (e.g. one it unpadded itself)', () => {
    const real = crypto.publicDecrypt;
    vi.spyOn(crypto, 'publicDecrypt').mockImplementation((key, data) =>
      real(key as crypto.KeyLike, data as Uint8Array).subarray(-32),
    );
    expect(probeRsaOperation()).toBe(MOD_POW);
  });

  it('falls back where publicDecrypt answers the same block whatever it is given (a signature one bit off must not open)', () => {
    const real = crypto.publicDecrypt;
    const genuine = real(
      { key: crypto.createPublicKey(publicPem(2048)), padding: crypto.constants.RSA_NO_PADDING },
      Buffer.from(PROBE_SIGNATURE, 'base64'),
    );
    vi.spyOn(crypto, 'publicDecrypt').mockImplementation(() => Buffer.from(genuine));
    expect(probeRsaOperation()).toBe(MOD_POW);
  });

  it('TypeError naming jobhook/web, with each reason, where neither works', () => {
    vi.spyOn(crypto, 'publicDecrypt').mockImplementation(unknownPadding);
    vi.spyOn(publicKeyPrototype(), 'export').mockImplementation(() => {
      throw new Error('JWK export is not supported');
    });
    expect(() => probeRsaOperation()).toThrow(TypeError);
    expect(() => probeRsaOperation()).toThrow(
      /publicDecrypt: Unknown padding; modPow: JWK export is not supported.*'jobhook\/web'/,
    );
  });
});

describe('a process whose publicDecrypt has no raw RSA (as on Deno), from its first import', () => {
  it('createVerifier verifies every genuine fixture (every dialect, 2048 to 4096 bits) through modPow; tampered and forged → SIGNATURE_INVALID', async () => {
    const decrypt = vi.spyOn(crypto, 'publicDecrypt').mockImplementation(unknownPadding);
    vi.resetModules();
    const { createVerifier } = await import('../../../src/index.js');
    const fixtures = deliveries();
    expect(fixtures.length).toBeGreaterThan(8);
    for (const d of fixtures) {
      const verifier = createVerifier({ publicKey: [publicPem(3072), publicPem(d.keyBits)], now });
      expect(verifier.verify(d.body, d.headers).jobId, d.name).toBe(d.jobId);
      expect(() => verifier.verify(d.body.replace(d.jobId, `${d.jobId}x`), d.headers), d.name).toThrow(
        expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
      );
    }
    const single = createVerifier({ publicKey: publicPem(2048), now });
    expect(() => single.verify('{}', { 'X-Service-Signature': '01'.repeat(256) })).toThrow(
      expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
    );
    // The probe tried publicDecrypt once; after that it is never asked again.
    expect(decrypt).toHaveBeenCalledTimes(1);
  });

  it('jobhook/express answers a genuine delivery 200 processed, then duplicate, and a tampered one 401', async () => {
    vi.spyOn(crypto, 'publicDecrypt').mockImplementation(unknownPadding);
    vi.resetModules();
    const { createReceiver } = await import('../../../src/express.js');
    const d = deliveries().find((x) => x.keyBits === 2048)!;
    const app = express();
    app.post('/hook', createReceiver({ publicKey: publicPem(2048), now, onEvent: () => undefined }));
    const send = (body: string) => request(app).post('/hook').set(d.headers).send(body);
    expect((await send(d.body)).body).toMatchObject({ status: 'processed' });
    expect((await send(d.body)).body).toMatchObject({ status: 'duplicate' });
    const tampered = await send(d.body.replace(d.jobId, `${d.jobId}x`));
    expect(tampered.status).toBe(401);
  });

  it('where no operation works, every Node entry refuses at construction with a TypeError naming jobhook/web', async () => {
    vi.spyOn(crypto, 'publicDecrypt').mockImplementation(unknownPadding);
    vi.spyOn(publicKeyPrototype(), 'export').mockImplementation(() => {
      throw new Error('JWK export is not supported');
    });
    vi.resetModules();
    const root = await import('../../../src/index.js');
    const expressEntry = await import('../../../src/express.js');
    const options = { publicKey: publicPem(2048), onEvent: () => undefined };
    const refusal =
      /^jobhook's Node entries cannot verify signatures in this runtime.*Use createReceiver or createVerifier from 'jobhook\/web'/;
    expect(() => root.createVerifier({ publicKey: options.publicKey })).toThrow(refusal);
    expect(() => root.createReceiver(options)).toThrow(refusal);
    expect(() => expressEntry.createReceiver(options)).toThrow(refusal);
    expect(() => expressEntry.createMiddleware({ publicKey: options.publicKey })).toThrow(refusal);
  });
});
