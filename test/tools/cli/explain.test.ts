import { generateKeyPairSync } from 'node:crypto';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalize, signDelivery } from '../../../src/index.js';
import { payloadText } from '../../helpers/deliveries.js';
import { privatePem } from '../../helpers/keys.js';
import { fixture } from '../../helpers/paths.js';
import { cli } from './run.js';

const K2048 = fixture('keys', 'test-2048-public.pem');
let dir: string;
const file = (name: string, content: string) => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};
const d = signDelivery(payloadText('explain-job'), privatePem(2048));
const sig = d.headers['X-Service-Signature']!;
const capture = (name: string, body: string, signature = sig) =>
  file(name, JSON.stringify({ headers: { ...d.headers, 'X-Service-Signature': signature }, body }));
const causes = (stdout: string) => stdout.split('\n').filter((l) => l.startsWith('CAUSE: '));

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'jobhook-explain-'));
});

describe('jobhook explain names the cause', () => {
  it('valid delivery → exit 0', async () => {
    const r = await cli(['explain', '--key', K2048, capture('ok.json', d.body)]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^VALID\n/);
  });

  it('a body pretty-printed by a logger (JSON.stringify(…, null, 2))', async () => {
    const r = await cli([
      'explain',
      '--key',
      K2048,
      capture('pretty.json', JSON.stringify(JSON.parse(d.body), null, 2)),
    ]);
    expect(r.code).toBe(1);
    expect(causes(r.stdout)[0]).toMatch(
      /pretty-printed by JSON\.stringify.*1\.0 → 1.*"confidence", "x".*With those restored it verifies/,
    );
  });

  it('a body with 1.0 turned into 1', async () => {
    const r = await cli([
      'explain',
      '--key',
      K2048,
      capture('floats.json', d.body.replace('"confidence":1.0', '"confidence":1')),
    ]);
    expect(r.code).toBe(1);
    expect(causes(r.stdout)[0]).toMatch(/parsed and serialized again.*1\.0 → 1.*"confidence"/);
  });

  it('a truncated signature', async () => {
    const r = await cli(['explain', '--key', K2048, capture('trunc.json', d.body, sig.slice(0, 500))]);
    expect(causes(r.stdout)[0]).toBe(
      "CAUSE: The signature has 500 hex digits but the key's modulus needs 512: it was truncated.",
    );
  });

  it('a signature with spaces', async () => {
    const r = await cli([
      'explain',
      '--key',
      K2048,
      capture('spaces.json', d.body, sig.replace(/(.{64})/g, '$1 ').trim()),
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('CONTAINS WHITESPACE');
    expect(causes(r.stdout)[0]).toMatch(/whitespace inside the hex; without it the signature verifies/);
  });

  it('the wrong key', async () => {
    const other = file(
      'other.pem',
      generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({
        type: 'spki',
        format: 'pem',
      }) as string,
    );
    const r = await cli(['explain', '--key', other, capture('wrongkey.json', d.body)]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('does not open the signature (wrong key?)');
    expect(causes(r.stdout)[0]).toMatch(/made with another key/);
  });

  it('a payload signed with another dialect', async () => {
    const p = signDelivery(payloadText('py-job'), privatePem(2048), { dialect: 'python' });
    const r = await cli(['explain', '--key', K2048, file('python.json', JSON.stringify(p))]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/dialect python +sha256 [0-9a-f]{64} +VERIFIES with key 0/);
    expect(causes(r.stdout)[0]).toMatch(/signed in the python dialect, not the gateway's default orjson/);
  });

  it('a tampered body with the right key: the key opens the signature but the digest matches no dialect', async () => {
    const r = await cli([
      'explain',
      '--key',
      K2048,
      capture('tampered.json', d.body.replace('Grüße', 'Gruß')),
    ]);
    expect(causes(r.stdout)[0]).toMatch(
      /Key 0 opens the signature \(the key is right\), but the signed digest matches no dialect/,
    );
  });

  it('--expected-canonical shows the first differing byte with context', async () => {
    const ours = canonicalize(d.body);
    const theirs = file('expected.txt', ours.replace('"confidence": 1.0', '"confidence": 1.00'));
    const r = await cli([
      'explain',
      '--key',
      K2048,
      '--expected-canonical',
      theirs,
      capture('cmp.json', d.body),
    ]);
    const at = Buffer.byteLength(
      ours.slice(0, ours.indexOf('"confidence": 1.0') + '"confidence": 1.0'.length),
    );
    expect(r.stdout).toContain(`expected canonical (orjson): first difference at byte ${at}`);
    expect(r.stdout).toMatch(/ours: +".*confidence\\": 1\.0/);
    const same = await cli([
      'explain',
      '--key',
      K2048,
      '--expected-canonical',
      file('same.txt', ours),
      capture('cmp2.json', d.body),
    ]);
    expect(same.stdout).toContain('expected canonical (orjson): identical');
  });

  it('--json prints the findings', async () => {
    const r = await cli(['explain', '--key', K2048, '--json', capture('json.json', d.body)]);
    const e = JSON.parse(r.stdout) as {
      valid: boolean;
      dialects: Array<{ dialect: string }>;
      keys: Array<{ wellFormed: boolean }>;
    };
    expect(e.valid).toBe(true);
    expect(e.dialects.map((x) => x.dialect)).toEqual(['orjson', 'orjson-legacy', 'python-utf8', 'python']);
    expect(e.keys[0]!.wellFormed).toBe(true);
  });

  it('refuses several deliveries', async () => {
    const r = await cli([
      'explain',
      '--key',
      K2048,
      file('two.jsonl', `${JSON.stringify(d)}\n${JSON.stringify(d)}\n`),
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/one delivery/);
  });
});

/** A payload whose output holds `count` arrays nested `depth` deep: its canonical form is ~`depth` × larger. */
const nestedBody = (depth: number, count: number) =>
  payloadText('nested-job').replace(
    '"output":{',
    `"output":{"nest":[${Array.from({ length: count }, () => '['.repeat(depth) + '1' + ']'.repeat(depth)).join(',')}],`,
  );
type Json = {
  valid: boolean;
  skipped?: { reason: string; limit?: number };
  dialects: unknown[];
  body?: unknown;
  causes: Array<{ kind: string; text: string }>;
};

describe('a signature in base64, not hex', () => {
  const base64 = Buffer.from(sig, 'hex').toString('base64');
  const url = Buffer.from(sig, 'hex').toString('base64url');
  const SIZE = '344 characters, 256 bytes once decoded: the size of a 2048-bit RSA signature';

  it('explain says so, and that the key opens the decoded bytes (the signature is right, its encoding is not)', async () => {
    const r = await cli(['explain', '--key', K2048, capture('base64.json', d.body, base64)]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`\nsignature header: BASE64, NOT HEX (${SIZE})\n`);
    expect(causes(r.stdout)).toEqual([
      `CAUSE: The signature header looks like base64, not hex (${SIZE}). The gateway sends the signature in hex: decoded, it opens with key 0, so the signature is right and only its encoding is not: whatever wrote this header (a sender other than the gateway, a proxy, a test written by hand) re-encoded it.`,
    ]);
    // URL-safe base64 without padding, from another key: base64 all the same, opened by none.
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    const foreign = Buffer.from(signDelivery(d.body, other).headers['X-Service-Signature']!, 'hex').toString(
      'base64url',
    );
    const json = await cli(['explain', '--key', K2048, '--json', capture('base64url.json', d.body, foreign)]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      signature: { base64: { characters: 342, bytes: 256 } },
      causes: [
        { kind: 'base64', characters: 342, bytes: 256, text: expect.stringMatching(/encoded it otherwise/) },
      ],
    });
    expect(url).toHaveLength(342);
  });

  it('verify adds the hint to SIGNATURE_MALFORMED, in text and JSON; other non-hex signatures get none', async () => {
    const path = capture('base64-verify.json', d.body, base64);
    const text = await cli(['verify', '--key', K2048, path]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(
      new RegExp(
        `^INVALID SIGNATURE_MALFORMED .* \\(this looks like base64 \\(${SIZE}\\); the gateway sends hex\\)\\n$`,
      ),
    );
    const json = await cli(['verify', '--key', K2048, '--json', path]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      code: 'SIGNATURE_MALFORMED',
      hint: `this looks like base64 (${SIZE}); the gateway sends hex`,
    });
    const garbled = await cli([
      'verify',
      '--key',
      K2048,
      capture('garbled.json', d.body, `${sig.slice(0, -2)}zz`),
    ]);
    expect(garbled.stdout).toMatch(/^INVALID SIGNATURE_MALFORMED /);
    expect(garbled.stdout).not.toContain('base64');
  });
});

describe("jobhook explain is bounded by the verifier's limits", () => {
  it('no key opens the signature: the body is not analysed (no canonical form), header diagnostics stay', async () => {
    const forged = 'ab'.repeat(256);
    const f = capture('forged.json', nestedBody(900, 30), forged);
    const r = await cli(['explain', '--key', K2048, f]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('length matches, does not open the signature (wrong key?)');
    expect(r.stdout).toContain('body: not analysed: no key opens the signature, so no body can match it');
    expect(r.stdout).not.toMatch(/^dialect /m);
    expect(causes(r.stdout)).toEqual([
      expect.stringMatching(/^CAUSE: No key opens the signature .* made with another key/),
    ]);
    const json = JSON.parse((await cli(['explain', '--key', K2048, '--json', f])).stdout) as Json;
    expect(json).toMatchObject({ valid: false, skipped: { reason: 'no-key-opens' }, dialects: [] });
    expect(json.body).toBeUndefined();
    // A truncated signature opens nothing either: the body is not analysed, the length is the cause.
    const trunc = await cli([
      'explain',
      '--key',
      K2048,
      capture('forged-short.json', nestedBody(900, 30), forged.slice(0, 500)),
    ]);
    expect(trunc.stdout).toContain('body: not analysed');
    expect(causes(trunc.stdout)[0]).toMatch(/500 hex digits/);
  });

  it('a replayed genuine signature on a body whose canonical form exceeds maxCanonicalBytes: not built', async () => {
    const r = await cli([
      'explain',
      '--key',
      K2048,
      '--json',
      capture('replayed.json', nestedBody(900, 120)),
    ]);
    expect(r.code).toBe(1);
    const json = JSON.parse(r.stdout) as Json;
    expect(json).toMatchObject({
      valid: false,
      skipped: { reason: 'canonical-too-large', limit: 4 * 25 * 1024 * 1024 },
      dialects: [],
    });
    expect(json.causes.map((c) => c.kind)).toEqual(['canonical-too-large']);
    expect(json.causes[0]!.text).toMatch(
      /would exceed maxCanonicalBytes \(104857600 bytes\): the verifier refuses it \(CANONICAL_TOO_LARGE\)/,
    );
  });

  it('a body over maxBodyBytes is not analysed (--max-body-bytes); nesting deeper than maxDepth is malformed', async () => {
    const big = await cli([
      'explain',
      '--key',
      K2048,
      '--max-body-bytes',
      '100',
      capture('big.json', d.body),
    ]);
    expect(big.code).toBe(1);
    expect(big.stdout).toContain('body: not analysed: larger than maxBodyBytes');
    expect(causes(big.stdout)[0]).toMatch(
      new RegExp(`The body has ${Buffer.byteLength(d.body)} bytes, more than maxBodyBytes \\(100\\)`),
    );
    const deep = await cli(['explain', '--key', K2048, capture('deep.json', nestedBody(1001, 1))]);
    expect(deep.stdout).toMatch(/body: NOT STRICT JSON: .*1000/);
  });

  it('a replayed genuine signature on a body of 200,000 escaped quotes: the float repair scans it once', async () => {
    const body = payloadText('quotes-job').replace(
      '"text":"Grüße"',
      `"text":"${'\\"'.repeat(200_000)}","confidence2":1`,
    );
    const r = await cli(['explain', '--key', K2048, capture('quotes.json', body)]);
    expect(r.code).toBe(1);
    expect(causes(r.stdout)[0]).toMatch(
      /Key 0 opens the signature \(the key is right\), but the signed digest matches no dialect/,
    );
  });

  it('input echoed in the report (key file names, canonical context) has its control characters escaped', async () => {
    const key = join(dir, 'gateway\u202egpj.pem');
    copyFileSync(K2048, key);
    const body = d.body.replace('Grüße', 'Gr\u202e\u009bße');
    const r = await cli([
      'explain',
      '--key',
      key,
      '--expected-canonical',
      file('exp.txt', canonicalize(d.body)),
      capture('bidi.json', body),
    ]);
    expect(r.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(r.stdout).toContain('key 0 (' + join(dir, 'gateway\\u202egpj.pem') + ')');
    expect(r.stdout).toMatch(/ours: +".*Gr\\u202e\\u009b/);
    const json = await cli([
      'explain',
      '--key',
      key,
      '--json',
      '--expected-canonical',
      file('exp2.txt', canonicalize(d.body)),
      capture('bidi2.json', body),
    ]);
    expect(json.stdout).not.toMatch(/[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect((JSON.parse(json.stdout) as { expected: { got: string } }).expected.got).toContain(
      'Gr\u202e\u009b',
    );
  });
});
