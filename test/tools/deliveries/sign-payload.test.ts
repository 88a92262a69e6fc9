import { createPrivateKey, createPublicKey } from 'node:crypto';
import express from 'express';
import supertest from 'supertest';
import { describe, expect, it } from 'vitest';
import { createReceiver } from '../../../src/express.js';
import { createVerifier, DIALECTS } from '../../../src/index.js';
import { examplePayload } from '../../../src/tools/deliveries/payload.js';
import { checkReceiver, generateTestKeys, signPayload, startGatewaySimulator } from '../../../src/testing.js';
import { OptionError } from '../../../src/lib/base/option-error.js';
import { privatePem, publicPem } from '../../helpers/keys.js';
import { fixture } from '../../helpers/paths.js';

describe('generateTestKeys', () => {
  it('makes a 2048-bit RSA pair of PEM strings by default that sign and verify', () => {
    const keys = generateTestKeys();
    expect(keys.privateKey).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(keys.publicKey).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
    expect(createPublicKey(keys.publicKey).asymmetricKeyDetails?.modulusLength).toBe(2048);
    const { body, headers } = signPayload(examplePayload({ jobId: 'k-1' }), keys.privateKey);
    expect(createVerifier({ publicKey: keys.publicKey }).verify(body, headers).jobId).toBe('k-1');
  });

  it('takes bits 3072 or 4096 and refuses other sizes', () => {
    expect(
      createPrivateKey(generateTestKeys({ bits: 3072 }).privateKey).asymmetricKeyDetails?.modulusLength,
    ).toBe(3072);
    expect(() => generateTestKeys({ bits: 1024 })).toThrow(OptionError);
    expect(() => generateTestKeys({ bits: 1024 })).toThrow('bits must be 2048, 3072 or 4096, got 1024');
  });
});

describe('signPayload', () => {
  const privateKey = privatePem(2048);
  const publicKey = publicPem(2048);

  it.each(DIALECTS)(
    'a string payload signed in %s verifies with createVerifier in that dialect only',
    (dialect) => {
      const payload = examplePayload({ jobId: `d-${dialect}` });
      const { body, headers } = signPayload(payload, privateKey, { dialect });
      expect(body).toBe(payload);
      expect(headers).toMatchObject({
        'Content-Type': 'application/json',
        'X-Service-Webhook': 'true',
        'X-Service-Hash-Algorithm': 'SHA256',
      });
      expect(createVerifier({ publicKey, dialects: [dialect] }).verify(body, headers)).toMatchObject({
        dialect,
        jobId: `d-${dialect}`,
      });
      // The example has 1e-7 and non-ASCII text: another dialect's canonical bytes differ.
      const others = DIALECTS.filter(
        (d) => d !== dialect && !(d.startsWith('orjson') && dialect.startsWith('orjson')),
      );
      expect(() => createVerifier({ publicKey, dialects: others }).verify(body, headers)).toThrow(
        expect.objectContaining({ code: 'SIGNATURE_INVALID' }),
      );
    },
  );

  it('bytes are signed as they are; an object is written with JSON.stringify (1.0 becomes 1)', () => {
    const bytes = new TextEncoder().encode(
      '{"event":"async_job_completed","job_id":"b-1","status":"success","output":{"x":1.0}}',
    );
    expect(signPayload(bytes, privateKey).body).toBe(
      '{"event":"async_job_completed","job_id":"b-1","status":"success","output":{"x":1.0}}',
    );
    const finished = new Date().toISOString();
    const fromObject = signPayload(
      {
        event: 'async_job_completed',
        job_id: 'o-1',
        status: 'success',
        finished_at: finished,
        output: { confidence: 1.0 },
      },
      privateKey,
    );
    expect(fromObject.body).toBe(
      `{"event":"async_job_completed","job_id":"o-1","status":"success","finished_at":"${finished}","output":{"confidence":1}}`,
    );
    expect(createVerifier({ publicKey }).verify(fromObject.body, fromObject.headers).jobId).toBe('o-1');
  });

  it('renames headers for a vendor prefix', () => {
    const { body, headers } = signPayload(examplePayload({ jobId: 'v-1' }), privateKey, {
      signatureHeader: 'X-Acme-Signature',
      algorithmHeader: 'X-Acme-Hash-Algorithm',
      webhookHeader: 'X-Acme-Webhook',
    });
    expect(Object.keys(headers)).toEqual([
      'Content-Type',
      'User-Agent',
      'X-Acme-Webhook',
      'X-Acme-Signature',
      'X-Acme-Hash-Algorithm',
    ]);
    expect(
      createVerifier({
        publicKey,
        signatureHeader: 'X-Acme-Signature',
        algorithmHeader: 'X-Acme-Hash-Algorithm',
      }).verify(body, headers).jobId,
    ).toBe('v-1');
  });

  it('is ready for supertest against a jobhook receiver', async () => {
    const keys = generateTestKeys();
    const app = express();
    const jobs: string[] = [];
    app.post(
      '/hook',
      createReceiver({ publicKey: keys.publicKey, onEvent: (_e, { jobId }) => void jobs.push(jobId) }),
    );
    const { body, headers } = signPayload(examplePayload({ jobId: 's-1' }), keys.privateKey);
    await supertest(app).post('/hook').set(headers).send(body).expect(200);
    expect(jobs).toEqual(['s-1']);
  });

  it('refuses a public key, a non-RSA key and a non-object payload with an OptionError', () => {
    expect(() => signPayload('{}', publicKey)).toThrow(expect.objectContaining({ option: 'privateKey' }));
    expect(() => signPayload(42 as unknown as string, privateKey)).toThrow(
      expect.objectContaining({ option: 'payload' }),
    );
  });
});

describe('a key file path given where the tools take a PEM', () => {
  const hint = (path: string) =>
    `privateKey looks like a file path (${JSON.stringify(path)}), not a PEM: pass the file's content, readFileSync(${JSON.stringify(path)}, 'utf8')`;

  it('is named as such, with the fix, by signPayload, checkReceiver and startGatewaySimulator', async () => {
    const real = fixture('keys', 'test-2048-private.pem');
    for (const path of [real, './keys/gateway-private.pem', 'test-only-private.pem', 'C:\\keys\\k.key']) {
      expect(() => signPayload('{}', path), path).toThrow(hint(path));
      await expect(checkReceiver('http://127.0.0.1:9/hook', { privateKey: path })).rejects.toThrow(
        hint(path),
      );
      await expect(startGatewaySimulator({ privateKey: path })).rejects.toThrow(hint(path));
    }
    // A PEM, or base64 DER, is no path: what is not a key is the signer's to refuse.
    expect(() => signPayload('{}', 'not a key')).toThrow('privateKey is not a private key');
    expect(() => signPayload('{}', 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC/x+y')).toThrow(
      'privateKey is not a private key',
    );
    expect(signPayload('{}', privatePem(2048)).headers['X-Service-Signature']).toMatch(/^[0-9a-f]{512}$/);
  });
});
