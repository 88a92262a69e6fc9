import crypto, { createHash, createPrivateKey, generateKeyPairSync, sign } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  canonicalize,
  createVerifier,
  DIALECTS,
  parseJson,
  signDelivery,
  type VerifierOptions,
} from '../../../src/index.js';
import { createVerifier as createWebVerifier } from '../../../src/web.js';
import { deliveries, privatePem, publicPem } from '../../helpers/keys.js';

// The fixtures finished at 2026-11-21T10:00:05Z: a clock inside the replay window.
const now = () => Date.parse('2026-11-21T10:05:00Z');
const pub = publicPem(2048);
const key = privatePem(2048);

/** A signature the test key really made, over some other message: it opens, and covers nothing here. */
function genuineSignatureOf(message: string): string {
  return sign('sha256', Buffer.from(message), createPrivateKey(key)).toString('hex');
}
/** 512 hex digits the test key never made. */
const FORGED = 'ab'.repeat(256);

async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === 'function' ? p() : p);
    return 'VALID';
  } catch (err) {
    return (err as { code?: string }).code ?? `THREW ${String(err)}`;
  }
}

const backends: Array<
  [
    string,
    (
      body: string | Uint8Array,
      headers: Record<string, string>,
      options: VerifierOptions,
    ) => Promise<unknown>,
  ]
> = [
  ['node:crypto', async (b, h, o) => createVerifier({ now, ...o }).verify(b, h)],
  [
    'WebCrypto',
    (b, h, o) => createWebVerifier({ now, ...o } as Parameters<typeof createWebVerifier>[0]).verify(b, h),
  ],
];

const nested = (depth: number, items: number) =>
  '['.repeat(depth) + '1,'.repeat(items) + '1' + ']'.repeat(depth);

describe('the signature is opened before the body is read', () => {
  afterEach(() => vi.restoreAllMocks());

  for (const [name, verify] of backends) {
    it(`${name}: a forged signature on a body that is not even JSON → SIGNATURE_INVALID, not BODY_MALFORMED`, async () => {
      expect(
        await codeOf(verify('{"job_id": nope', { 'X-Service-Signature': FORGED }, { publicKey: pub })),
      ).toBe('SIGNATURE_INVALID');
    });

    it(`${name}: amplification bodies with a forged signature are refused without building anything`, async () => {
      for (const body of [
        nested(999, 2_000_000),
        '[' + '9'.repeat(100_000) + ']',
        `{"s":"${'x'.repeat(10_000_000)}"}`,
      ]) {
        expect(await codeOf(verify(body, { 'X-Service-Signature': FORGED }, { publicKey: pub }))).toBe(
          'SIGNATURE_INVALID',
        );
      }
    });

    it(`${name}: answers in order: unsigned malformed → 401 code, signed malformed → 400 code`, async () => {
      expect(await codeOf(verify('not json', {}, { publicKey: pub }))).toBe('SIGNATURE_MISSING');
      expect(await codeOf(verify('not json', { 'X-Service-Signature': 'zz' }, { publicKey: pub }))).toBe(
        'SIGNATURE_MALFORMED',
      );
      expect(
        await codeOf(
          verify('not json', { 'X-Service-Signature': genuineSignatureOf('x') }, { publicKey: pub }),
        ),
      ).toBe('BODY_MALFORMED');
    });

    it(`${name}: a signature with characters outside ASCII whose low byte is hex (š is U+0161) → SIGNATURE_MALFORMED`, async () => {
      const d = signDelivery(
        '{"event":"async_job_completed","job_id":"a","status":"success","output":{}}',
        key,
      );
      const sig = d.headers['X-Service-Signature']!;
      // Node's Buffer would decode "š" as 0x61 ("a").
      const bent = sig.slice(0, -1) + (sig.endsWith('a') ? '\u0161' : sig.slice(-1) === 'b' ? '\u0162' : 'g');
      expect(await codeOf(verify(d.body, { 'X-Service-Signature': bent }, { publicKey: pub }))).toBe(
        'SIGNATURE_MALFORMED',
      );
      expect(
        await codeOf(
          verify(d.body, { 'X-Service-Signature': 'ab'.repeat(255) + '\u0161\u0162' }, { publicKey: pub }),
        ),
      ).toBe('SIGNATURE_MALFORMED');
    });

    it(`${name}: a genuine signature over another body opens, then matches no dialect → SIGNATURE_INVALID naming the key`, async () => {
      const d = signDelivery(
        '{"event":"async_job_completed","job_id":"a","status":"success","output":{}}',
        key,
      );
      const other = '{"event":"async_job_completed","job_id":"b","status":"success","output":{}}';
      await expect(verify(other, d.headers, { publicKey: pub })).rejects.toThrow(
        /Key 0 opens the signature.*matches the canonical form of this body in no dialect/,
      );
    });
  }

  it('one RSA operation per key of the right size per delivery, whichever dialect signed it (node:crypto)', () => {
    const decrypt = vi.spyOn(crypto, 'publicDecrypt');
    const rsaVerify = vi.spyOn(crypto, 'verify');
    const otherKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    const other2048 = otherKey.export({ type: 'spki', format: 'pem' }) as string;
    const otherModulus = Buffer.from((otherKey.export({ format: 'jwk' }) as { n: string }).n, 'base64url');
    const single = createVerifier({ publicKey: pub, now });
    const rotation = createVerifier({ publicKey: [publicPem(3072), other2048, pub], now });
    const fixtures = deliveries().filter((d) => d.keyBits === 2048);
    expect(new Set(fixtures.map((d) => d.dialect))).toEqual(new Set(DIALECTS));
    for (const d of fixtures) {
      decrypt.mockClear();
      expect(single.verify(d.body, d.headers).jobId).toBe(d.jobId);
      expect(decrypt, `${d.name}`).toHaveBeenCalledTimes(1);
      decrypt.mockClear();
      expect(rotation.verify(d.body, d.headers).keyIndex).toBe(2);
      // Two keys have the signature's size (the 3072-bit one does not): one operation each,
      // except where the signature, as a number, is not even below the other key's modulus.
      const belowOther =
        Buffer.compare(Buffer.from(d.headers['X-Service-Signature']!, 'hex'), otherModulus) < 0;
      expect(decrypt, `${d.name} rotation`).toHaveBeenCalledTimes(belowOther ? 2 : 1);
    }
    decrypt.mockClear();
    // A forgery below the modulus costs the one operation; one not below it (0xab… > 0xc6… is not) costs none.
    expect(() => single.verify('{}', { 'X-Service-Signature': '01'.repeat(256) })).toThrow(
      /not made with the configured key/,
    );
    expect(decrypt).toHaveBeenCalledTimes(1);
    decrypt.mockClear();
    expect(() => single.verify('{}', { 'X-Service-Signature': 'ff'.repeat(256) })).toThrow(
      /not made with the configured key/,
    );
    expect(decrypt).toHaveBeenCalledTimes(0);
    expect(rsaVerify).not.toHaveBeenCalled();
  });

  it('the WebCrypto backend opens with its own arithmetic: no WebCrypto RSA call, any dialect', async () => {
    const subtleVerify = vi.spyOn(globalThis.crypto.subtle, 'verify');
    const web = createWebVerifier({ publicKey: pub, now });
    for (const d of deliveries().filter((x) => x.keyBits === 2048))
      expect((await web.verify(d.body, d.headers)).jobId).toBe(d.jobId);
    expect(subtleVerify).not.toHaveBeenCalled();
  });
});

describe('bounded canonical work for genuine signatures', () => {
  // 60,000 items 999 levels deep: a 120 KB body whose canonical text is ~120 MB.
  const deep = nested(999, 60_000);

  for (const [name, verify] of backends) {
    it(`${name}: a genuine signature on a body whose canonical form would pass maxCanonicalBytes → CANONICAL_TOO_LARGE, nothing built`, async () => {
      const headers = { 'X-Service-Signature': genuineSignatureOf('anything') };
      expect(await codeOf(verify(deep, headers, { publicKey: pub }))).toBe('CANONICAL_TOO_LARGE');
      // The bound is an option: a small one refuses a small body that expands.
      expect(
        await codeOf(verify(nested(50, 100), headers, { publicKey: pub, maxCanonicalBytes: 5_000 })),
      ).toBe('CANONICAL_TOO_LARGE');
    });

    it(`${name}: a validly signed nested body inside the bound verifies (streamed, never whole on node)`, async () => {
      const body = `{"event":"async_job_completed","job_id":"deep-1","status":"success","finished_at":"2026-11-21T10:00:05Z","output":{"d":${nested(400, 2_000)}}}`;
      const d = signDelivery(body, key);
      const r = (await verify(d.body, d.headers, { publicKey: pub })) as {
        jobId: string;
        canonicalSha256: string;
      };
      expect(r.jobId).toBe('deep-1');
      expect(r.canonicalSha256).toBe(createHash('sha256').update(canonicalize(body)).digest('hex'));
    });
  }

  it('the default bound is 4 × maxBodyBytes', async () => {
    const headers = { 'X-Service-Signature': genuineSignatureOf('anything') };
    const body = nested(100, 1_000); // ~2 KB body, ~200 KB canonical
    expect(
      await codeOf(() => createVerifier({ publicKey: pub, maxBodyBytes: 40_000 }).verify(body, headers)),
    ).toBe('CANONICAL_TOO_LARGE');
    expect(
      await codeOf(() => createVerifier({ publicKey: pub, maxBodyBytes: 60_000 }).verify(body, headers)),
    ).toBe('SIGNATURE_INVALID');
  });
});

describe('the event is what was signed', () => {
  const envelope = (value: string) =>
    `{"event":"async_job_completed","job_id":"m-1","status":"success","finished_at":"2026-11-21T10:00:05Z","output":{"n":${value}}}`;

  /** Signs `signedAs` (its canonical form in `dialect`) and delivers `wire` with that signature. */
  function deliver(signedAs: string, wire: string, dialect: (typeof DIALECTS)[number]) {
    const { headers } = signDelivery(envelope(signedAs), key, { dialect });
    // The wire body has the same canonical form, so the signature verifies for it.
    expect(canonicalize(envelope(wire), { dialect })).toBe(canonicalize(envelope(signedAs), { dialect }));
    return { body: envelope(wire), headers };
  }

  for (const [name, verify] of backends) {
    for (const integers of ['number', 'bigint', 'string'] as const) {
      it(`${name}, integers '${integers}': orjson reads an integer beyond 64 bits as a float, and so does the event`, async () => {
        const a = deliver('1e+20', '100000000000000000001', 'orjson');
        const ra = (await verify(a.body, a.headers, { publicKey: pub, integers, dialects: ['orjson'] })) as {
          event: { status: string; output: { n: unknown } };
        };
        expect(ra.event.output.n).toBe(1e20);
        const b = deliver('18446744073709551616', '18446744073709551999', 'orjson');
        const rb = (await verify(b.body, b.headers, { publicKey: pub, integers, dialects: ['orjson'] })) as {
          event: { output: { n: unknown } };
        };
        expect(rb.event.output.n).toBe(18446744073709551616);
      });
    }

    it(`${name}: python keeps the integer exact, and an integer -0 is 0 as its canonical text says`, async () => {
      const big = signDelivery(envelope('18446744073709551999'), key, { dialect: 'python-utf8' });
      const r = (await verify(big.body, big.headers, { publicKey: pub, integers: 'bigint' })) as {
        dialect: string;
        event: { output: { n: unknown } };
      };
      expect(r.dialect).toBe('python-utf8');
      expect(r.event.output.n).toBe(18446744073709551999n);
      const zero = deliver('0', '-0', 'orjson');
      const z = (await verify(zero.body, zero.headers, { publicKey: pub })) as {
        event: { output: { n: unknown } };
      };
      expect(Object.is(z.event.output.n, 0)).toBe(true);
    });
  }

  it('two wire bodies with one canonical form give one value, in every mode (property over many tokens)', () => {
    const tokens = [
      '-0',
      '0',
      '1',
      '100000000000000000001',
      '18446744073709551615',
      '18446744073709551616',
      '-9223372036854775809',
      '1e2',
      '100.0',
      '1.0',
      '-0.0',
      '1E400',
      '12345678901234567890123',
    ];
    for (const dialect of DIALECTS) {
      for (const integers of ['number', 'bigint', 'string'] as const) {
        const byCanonical = new Map<string, string>();
        for (const t of tokens) {
          let canonical: string;
          try {
            canonical = canonicalize(`[${t}]`, { dialect });
          } catch {
            continue; // no canonical form in this dialect
          }
          const d = signDelivery(envelope(t), key, { dialect });
          const r = createVerifier({ publicKey: pub, integers, dialects: [dialect], now }).verify(
            d.body,
            d.headers,
          );
          const value = (r.payload.output as { n: unknown }).n;
          const shown = typeof value === 'bigint' ? `${value}n` : Object.is(value, -0) ? '-0' : String(value);
          const seen = byCanonical.get(canonical);
          if (seen !== undefined)
            expect(`${dialect}/${integers} ${t}: ${shown}`).toBe(`${dialect}/${integers} ${t}: ${seen}`);
          byCanonical.set(canonical, shown);
          // And the value is the value of the canonical text itself (Python writes an overflow as Infinity).
          const fromCanonical = canonical.includes('Infinity')
            ? Infinity
            : (parseJson(canonical, { integers }) as unknown[])[0];
          expect(value, `${dialect}/${integers} ${t}`).toEqual(fromCanonical);
        }
      }
    }
  });

  it("an integer too long for BigInt in integers: 'bigint' is refused, not converted for seconds", () => {
    const d = signDelivery(envelope('1' + '0'.repeat(5_000)), key, { dialect: 'python' });
    expect(() =>
      createVerifier({ publicKey: pub, integers: 'bigint', dialects: ['python'], now }).verify(
        d.body,
        d.headers,
      ),
    ).toThrow(/converts at most 4300/);
    expect(
      (
        createVerifier({ publicKey: pub, integers: 'string', dialects: ['python'], now }).verify(
          d.body,
          d.headers,
        ).payload.output as { n: unknown }
      ).n,
    ).toHaveLength(5_001);
  });
});

describe('overflow: a number orjson cannot read has no orjson form', () => {
  const huge = '1' + '0'.repeat(309);
  it('canonicalize refuses it in both orjson dialects and writes it in the python ones', () => {
    for (const dialect of ['orjson', 'orjson-legacy'] as const)
      expect(() => canonicalize(`[${huge}]`, { dialect })).toThrow(
        /No canonical orjson.* overflows to Infinity/,
      );
    expect(canonicalize(`[${huge}]`, { dialect: 'python' })).toBe(`[\n  ${huge}\n]`);
    expect(canonicalize(`[-${huge}]`, { dialect: 'python-utf8' })).toBe(`[\n  -${huge}\n]`);
    expect(() => canonicalize(`[-${huge}]`)).toThrow(/Infinity/);
    // 308 digits still reads as a finite float.
    expect(canonicalize(`[${huge.slice(0, -1)}]`)).toBe('[\n  1e+308\n]');
  });

  it('a python-signed delivery holding it still verifies (python dialect), never as the text "undefined"', () => {
    const body = `{"event":"async_job_completed","job_id":"o-1","status":"success","finished_at":"2026-11-21T10:00:05Z","output":{"n":${huge}}}`;
    const d = signDelivery(body, key, { dialect: 'python' });
    expect(
      createVerifier({ publicKey: pub, now, integers: 'string' }).verify(d.body, d.headers).dialect,
    ).toBe('python-utf8');
  });
});

describe('job_id rule', () => {
  const signedWith = (jobId: string) =>
    signDelivery(
      `{"event":"async_job_completed","job_id":${JSON.stringify(jobId).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)},"status":"success","finished_at":"2026-11-21T10:00:05Z","output":{}}`,
      key,
      { dialect: 'python' },
    );

  for (const [name, verify] of backends) {
    it.each([
      ['a lone surrogate', 'job-\ud800', /lone surrogate/],
      ['U+0000', 'job-\u0000', /control character/],
      ['a C1 control', 'job-\u0085', /control character/],
      ['257 characters', 'j'.repeat(257), /longer than 256/],
      ['empty', '', /empty/],
    ])(`${name}: %s → PAYLOAD_INVALID`, async (_l, jobId, message) => {
      const d = signedWith(jobId);
      await expect(verify(d.body, d.headers, { publicKey: pub })).rejects.toMatchObject({
        code: 'PAYLOAD_INVALID',
      });
      await expect(verify(d.body, d.headers, { publicKey: pub })).rejects.toThrow(message);
    });

    it(`${name}: 256 characters, astral ones included, are fine`, async () => {
      const jobId = '😀'.repeat(56) + 'j'.repeat(200);
      const d = signedWith(jobId);
      expect(((await verify(d.body, d.headers, { publicKey: pub })) as { jobId: string }).jobId).toBe(jobId);
    });
  }
});

describe('replay window', () => {
  const body = (finished: string) =>
    `{"event":"async_job_completed","job_id":"r-1","status":"success","finished_at":"${finished}","output":{}}`;
  const finished = Date.parse('2026-11-21T10:00:05Z');

  for (const [name, verify] of backends) {
    it(`${name}: on by default, 24 h`, async () => {
      const d = signDelivery(body('2026-11-21T10:00:05Z'), key);
      expect(
        await codeOf(verify(d.body, d.headers, { publicKey: pub, now: () => finished + 86_400_000 - 1000 })),
      ).toBe('VALID');
      expect(
        await codeOf(verify(d.body, d.headers, { publicKey: pub, now: () => finished + 86_400_000 + 1000 })),
      ).toBe('EVENT_TOO_OLD');
      expect(
        await codeOf(
          verify(d.body, d.headers, {
            publicKey: pub,
            maxAgeSeconds: false,
            now: () => finished + 10 * 86_400_000,
          }),
        ),
      ).toBe('VALID');
    });

    it(`${name}: a delivery without finished_at cannot be placed in the window`, async () => {
      const d = signDelivery(
        '{"event":"async_job_completed","job_id":"r-2","status":"success","output":{}}',
        key,
      );
      expect(await codeOf(verify(d.body, d.headers, { publicKey: pub }))).toBe('PAYLOAD_INVALID');
      expect(await codeOf(verify(d.body, d.headers, { publicKey: pub, maxAgeSeconds: false }))).toBe('VALID');
    });
  }
});
