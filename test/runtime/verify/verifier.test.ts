import { createHash, createPublicKey, generateKeyPairSync } from 'node:crypto';
import forge from 'node-forge';
import { describe, expect, it } from 'vitest';
import {
  canonicalize,
  createVerifier,
  DIALECTS,
  signDelivery,
  verifyWebhook,
  type VerifiedDelivery,
  type VerifierOptions,
} from '../../../src/index.js';
import { createVerifier as createWebVerifier } from '../../../src/web.js';
import { deliveries, keyForms, privatePem, publicPem } from '../../helpers/keys.js';
import { readFixture } from '../../helpers/paths.js';

const all = deliveries();
// A second 2048-bit key made per run: it can only be the wrong key for these signatures.
const OTHER_2048 = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({
  type: 'spki',
  format: 'pem',
}) as string;

// The fixtures finished at 2026-11-21T10:00:05Z: verify them on a clock a few minutes later,
// inside the default 24 h replay window whatever day the tests run.
const FIXTURE_NOW = Date.parse('2026-11-21T10:05:00Z');
const now = () => FIXTURE_NOW;

type AnyVerify = (
  body: string | Uint8Array,
  headers: Record<string, string> | Headers,
  options: VerifierOptions,
) => Promise<VerifiedDelivery>;
const backends: Array<[string, AnyVerify]> = [
  ['node:crypto', async (b, h, o) => createVerifier({ now, ...o }).verify(b, h)],
  [
    'WebCrypto',
    (b, h, o) => createWebVerifier({ now, ...o } as Parameters<typeof createWebVerifier>[0]).verify(b, h),
  ],
];

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'VALID';
  } catch (err) {
    return (err as { code?: string }).code ?? `THREW ${String(err)}`;
  }
}

describe('signed deliveries made by Python cryptography (fixtures/sign_deliveries.py)', () => {
  it('covers four dialects, three key sizes, success/fail, compact/canonical/pretty bodies', () => {
    expect(all).toHaveLength(4 * 3 * 2 * 3);
  });

  /** Byte-identical dialects are tried once, so the first dialect whose bytes hash like Python's is reported. */
  const firstEquivalent = (d: (typeof all)[number]) =>
    DIALECTS.find(
      (x) =>
        createHash('sha256')
          .update(canonicalize(d.body, { dialect: x }))
          .digest('hex') === d.canonicalSha256,
    );

  it('fail payloads (no floats) are the same bytes in every UTF-8 dialect; the rest name their own dialect', () => {
    for (const d of all) {
      const failUtf8 = d.name.includes(' fail ') && d.dialect !== 'python';
      expect(firstEquivalent(d)).toBe(failUtf8 ? 'orjson' : d.dialect);
    }
  });

  for (const [name, verify] of backends) {
    it(`${name}: every delivery verifies with every key form and reports the right dialect`, async () => {
      for (const d of all) {
        for (const [form, key] of Object.entries(keyForms(d.keyBits))) {
          const r = await verify(d.body, d.headers, { publicKey: key });
          expect({ form, name: d.name, dialect: r.dialect, jobId: r.jobId, sha: r.canonicalSha256 }).toEqual({
            form,
            name: d.name,
            dialect: firstEquivalent(d),
            jobId: d.jobId,
            sha: d.canonicalSha256,
          });
        }
      }
    });
  }

  it('a KeyObject works too, and bytes work like text', () => {
    const d = all[0]!;
    const v = createVerifier({ publicKey: createPublicKey(publicPem(d.keyBits)), now });
    expect(v.verify(new TextEncoder().encode(d.body), d.headers).jobId).toBe(d.jobId);
  });

  it('node-forge, as an independent oracle, agrees that every fixture signature is valid', () => {
    for (const d of all.filter((x) => x.name.endsWith('compact'))) {
      const key = forge.pki.publicKeyFromPem(publicPem(d.keyBits));
      const md = forge.md.sha256.create();
      md.update(d.canonicalSha256, 'utf8');
      const sig = forge.util.hexToBytes(d.headers['X-Service-Signature']!);
      expect(key.verify(md.digest().bytes(), sig)).toBe(true);
    }
  });

  it('hands over the typed event with unknown fields kept', () => {
    const d = all.find((x) => x.name === 'orjson 2048 success compact')!;
    const { event, payload } = createVerifier({ publicKey: publicPem(2048), integers: 'bigint', now }).verify(
      d.body,
      d.headers,
    );
    expect(event.status).toBe('success');
    if (event.status !== 'success') throw new Error('narrowing');
    expect(event.output.confidence).toBe(1);
    expect(event.output.big).toBe(18446744073709551615n);
    expect(payload.future_field).toEqual({ kept: true });
    expect(payload).toBe(event);
    const f = all.find((x) => x.name === 'orjson 2048 fail compact')!;
    const failed = createVerifier({ publicKey: publicPem(2048), now }).verify(f.body, f.headers).event;
    expect(failed.status === 'fail' && failed.error.message).toBe('provider timeout');
  });
});

describe('the behaviour table, on both backends', () => {
  const d = all.find((x) => x.name === 'orjson 2048 success compact')!;
  const sig = d.headers['X-Service-Signature']!;
  const pub = publicPem(2048);
  const withSig = (s: string | undefined, extra: Record<string, string> = {}) => {
    const h: Record<string, string> = { 'content-type': 'application/json', ...extra };
    if (s !== undefined) h['x-service-signature'] = s;
    return h;
  };
  const flip = (s: string, at: number) => s.slice(0, at) + (s[at] === '0' ? '1' : '0') + s.slice(at + 1);

  const table: Array<[string, string | Uint8Array, Record<string, string>, VerifierOptions, string]> = [
    ['valid', d.body, withSig(sig), { publicKey: pub }, 'VALID'],
    ['uppercase hex', d.body, withSig(sig.toUpperCase()), { publicKey: pub }, 'VALID'],
    [
      'header names in any case',
      d.body,
      { 'X-SERVICE-SIGNATURE': sig, 'x-service-hash-algorithm': 'sha256' },
      { publicKey: pub },
      'VALID',
    ],
    [
      'blanks around the value (not part of an HTTP value)',
      d.body,
      withSig(` ${sig}\t`),
      { publicKey: pub },
      'VALID',
    ],
    [
      'tampered body',
      d.body.replace('"acme"', '"acne"'),
      withSig(sig),
      { publicKey: pub },
      'SIGNATURE_INVALID',
    ],
    [
      'body re-serialized by JSON.parse/stringify (1.0 became 1)',
      JSON.stringify(JSON.parse(d.body)),
      withSig(sig),
      { publicKey: pub },
      'SIGNATURE_INVALID',
    ],
    ['wrong key (same size)', d.body, withSig(sig), { publicKey: OTHER_2048 }, 'SIGNATURE_INVALID'],
    ['wrong key size', d.body, withSig(sig), { publicKey: publicPem(3072) }, 'SIGNATURE_MALFORMED'],
    ['flipped signature byte', d.body, withSig(flip(sig, 100)), { publicKey: pub }, 'SIGNATURE_INVALID'],
    ['truncated signature', d.body, withSig(sig.slice(0, -2)), { publicKey: pub }, 'SIGNATURE_MALFORMED'],
    [
      'whitespace inside the signature',
      d.body,
      withSig(sig.slice(0, 100) + ' ' + sig.slice(100)),
      { publicKey: pub },
      'SIGNATURE_MALFORMED',
    ],
    ['not hex', d.body, withSig('zz' + sig.slice(2)), { publicKey: pub }, 'SIGNATURE_MALFORMED'],
    ['missing header', d.body, withSig(undefined), { publicKey: pub }, 'SIGNATURE_MISSING'],
    ['empty header', d.body, withSig(''), { publicKey: pub }, 'SIGNATURE_MISSING'],
    [
      'wrong algorithm header',
      d.body,
      withSig(sig, { 'X-Service-Hash-Algorithm': 'SHA1' }),
      { publicKey: pub },
      'ALGORITHM_UNSUPPORTED',
    ],
    ['malformed body', d.body.slice(0, -1), withSig(sig), { publicKey: pub }, 'BODY_MALFORMED'],
    [
      'duplicate key',
      d.body.replace('{', '{"job_id":"x",'),
      withSig(sig),
      { publicKey: pub },
      'BODY_MALFORMED',
    ],
    ['body over maxBodyBytes', d.body, withSig(sig), { publicKey: pub, maxBodyBytes: 100 }, 'BODY_TOO_LARGE'],
    [
      'only one dialect allowed, not the signed one',
      d.body,
      withSig(sig),
      { publicKey: pub, dialects: ['python'] },
      'SIGNATURE_INVALID',
    ],
    [
      'vendor header names',
      d.body,
      { 'X-Acme-Signature': sig },
      { publicKey: pub, signatureHeader: 'X-Acme-Signature' },
      'VALID',
    ],
    [
      'rotation: the second key verifies',
      d.body,
      withSig(sig),
      { publicKey: [publicPem(4096), OTHER_2048, pub] },
      'VALID',
    ],
  ];

  for (const [name, verify] of backends) {
    it.each(table)(`${name}: %s`, async (_label, body, headers, options, want) => {
      expect(await codeOf(verify(body, headers, options))).toBe(want);
    });

    it(`${name}: takes a Fetch Headers object`, async () => {
      expect((await verify(d.body, new Headers(withSig(sig)), { publicKey: pub })).keyIndex).toBe(0);
    });

    it(`${name}: reports which key verified during a rotation`, async () => {
      expect(
        (await verify(d.body, withSig(sig), { publicKey: [publicPem(4096), OTHER_2048, pub] })).keyIndex,
      ).toBe(2);
    });

    it(`${name}: messages say what to do`, async () => {
      await expect(
        verify(JSON.stringify(JSON.parse(d.body)), withSig(sig), { publicKey: pub }),
      ).rejects.toThrow(/pass the raw bytes/);
      await expect(verify(d.body, withSig(sig.slice(0, -2)), { publicKey: pub })).rejects.toThrow(
        /510 hex digits but the key's modulus needs 512/,
      );
    });
  }
});

describe('payload checks after a valid signature (signed here with the test key)', () => {
  const key = privatePem(2048);
  const pub = publicPem(2048);
  const base = {
    event: 'async_job_completed',
    job_id: 'j-1',
    status: 'success',
    output: { a: 1.0 },
    finished_at: '2026-11-21T10:00:05Z',
  };
  const signed = (payload: unknown, raw?: string) => signDelivery(raw ?? JSON.stringify(payload), key);

  it.each([
    ['no job_id', { ...base, job_id: undefined }, 'PAYLOAD_INVALID'],
    ['job_id not a string', { ...base, job_id: 7 }, 'PAYLOAD_INVALID'],
    ['unknown status', { ...base, status: 'done' }, 'PAYLOAD_INVALID'],
    ['success without output', { ...base, output: undefined }, 'PAYLOAD_INVALID'],
    [
      'fail without error.message',
      { ...base, status: 'fail', output: undefined, error: {} },
      'PAYLOAD_INVALID',
    ],
    ['another event', { ...base, event: 'job_started' }, 'PAYLOAD_INVALID'],
    ['an array body', [1, 2], 'PAYLOAD_INVALID'],
    ['valid', base, 'VALID'],
  ])('%s -> %s', async (_l, payload, want) => {
    const { headers, body } = signed(payload);
    for (const [, verify] of backends)
      expect(await codeOf(verify(body, headers, { publicKey: pub }))).toBe(want);
  });

  it('maxAgeSeconds rejects an old event and accepts a fresh one', async () => {
    const { headers, body } = signed(base);
    const finished = Date.parse(base.finished_at);
    for (const [, verify] of backends) {
      expect(
        await codeOf(
          verify(body, headers, { publicKey: pub, maxAgeSeconds: 300, now: () => finished + 301_000 }),
        ),
      ).toBe('EVENT_TOO_OLD');
      expect(
        await codeOf(
          verify(body, headers, { publicKey: pub, maxAgeSeconds: 300, now: () => finished + 299_000 }),
        ),
      ).toBe('VALID');
    }
    const noDate = signed({ ...base, finished_at: undefined });
    expect(
      await codeOf(backends[0]![1](noDate.body, noDate.headers, { publicKey: pub, maxAgeSeconds: 300 })),
    ).toBe('PAYLOAD_INVALID');
  });

  it('verifyWebhook imports the keys once per options object', () => {
    const { headers, body } = signed(base);
    const options = { publicKey: pub, now };
    expect(verifyWebhook(body, headers, options).jobId).toBe('j-1');
    expect(verifyWebhook(body, headers, options).jobId).toBe('j-1');
  });

  it('the canonical SHA-256 is the digest of the canonical bytes', () => {
    const { headers, body } = signed(base);
    const r = createVerifier({ publicKey: pub, now }).verify(body, headers);
    const canonical =
      '{\n  "event": "async_job_completed",\n  "finished_at": "2026-11-21T10:00:05Z",\n  "job_id": "j-1",\n  "output": {\n    "a": 1\n  },\n  "status": "success"\n}';
    // JSON.stringify wrote 1.0 as 1, so the signed canonical form has the integer 1.
    expect(r.canonicalSha256).toBe(createHash('sha256').update(canonical).digest('hex'));
  });
});

describe('keys are checked at construction', () => {
  const bad: Array<[string, unknown, RegExp]> = [
    [
      'a 1024-bit key',
      readFixture('keys', 'weak-1024-public.pem'),
      /1024-bit RSA key; jobhook requires at least 2048 bits/,
    ],
    ['an EC key', readFixture('keys', 'ec-p256-public.pem'), /an EC key; the gateway signs with RSA/],
    ['a private key', privatePem(2048), /private key/],
    ['not a key', 'hello', /publicKey is a string starting "hello"; expected a PEM/],
    ['nothing', undefined, /publicKey is required/],
    ['an empty list', [], /at least one key/],
    ['a JWK for another algorithm', { ...keyForms(2048).JWK, alg: 'PS256' }, /PS256/],
    ['an EC JWK', { kty: 'EC', crv: 'P-256', x: 'a', y: 'b' }, /kty "EC"/],
  ];
  it.each(bad)('rejects %s with a TypeError that says why', (_l, publicKey, message) => {
    expect(() => createVerifier({ publicKey } as VerifierOptions)).toThrow(TypeError);
    expect(() => createVerifier({ publicKey } as VerifierOptions)).toThrow(message);
    expect(() => createWebVerifier({ publicKey } as Parameters<typeof createWebVerifier>[0])).toThrow(
      message,
    );
  });

  it('rejects bad options with a TypeError', () => {
    const pub = publicPem(2048);
    expect(() => createVerifier({ publicKey: pub, dialects: ['json5' as 'python'] })).toThrow(TypeError);
    expect(() => createVerifier({ publicKey: pub, maxBodyBytes: -1 })).toThrow(TypeError);
    expect(() => createVerifier({ publicKey: pub, signatureHeader: 'bad header' })).toThrow(TypeError);
  });

  it('takes a PEM as configuration systems mangle it: newlines written as \\n, surrounding quotes', async () => {
    const d = all.find((x) => x.name === 'orjson 2048 success compact')!;
    const pem = readFixture('keys', 'test-2048-public-pkcs1.pem').trim();
    const escaped = pem.replace(/\n/g, '\\n'); // what `KEY="-----BEGIN…\n…"` in a .env file gives
    expect(escaped).not.toContain('\n');
    for (const key of [escaped, `"${escaped}"`, `'${pem}'`, `  ${pem}\n\n`]) {
      for (const [, verify] of backends)
        expect((await verify(d.body, d.headers, { publicKey: key })).jobId).toBe(d.jobId);
    }
  });

  it('key errors say what was found and what is expected', () => {
    expect(() => createVerifier({ publicKey: '-----BEGIN PUBLIC KEY-----\nMIIB' })).toThrow(
      /publicKey is a PEM "PUBLIC KEY" without its matching END line; expected a PEM/,
    );
    expect(() => createVerifier({ publicKey: 42 as unknown as string })).toThrow(
      /publicKey is a number; expected a PEM .*DER bytes, a JWK or a key object/,
    );
    expect(() =>
      createVerifier({ publicKey: '-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----' }),
    ).toThrow(/invalid base64 \(found "!"\)/);
    expect(() =>
      createVerifier({ publicKey: '-----BEGIN EC PARAMETERS-----\nAA==\n-----END EC PARAMETERS-----' }),
    ).toThrow(/is a PEM "EC PARAMETERS"; expected "PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE"/);
  });

  it('a body that is a parsed object is refused with BODY_UNAVAILABLE, saying how to keep the raw bytes', () => {
    expect(() => createVerifier({ publicKey: publicPem(2048) }).verify({} as unknown as string, {})).toThrow(
      expect.objectContaining({
        code: 'BODY_UNAVAILABLE',
        message: expect.stringMatching(/a parsed object, not the raw request body.*keepRawBody/),
      }),
    );
  });
});
