import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { signDelivery } from '../../../src/index.js';
import { payloadText } from '../../helpers/deliveries.js';
import { deliveries, privatePem } from '../../helpers/keys.js';
import { fixture } from '../../helpers/paths.js';
import { cli } from './run.js';

const K2048 = fixture('keys', 'test-2048-public.pem');
const K3072 = fixture('keys', 'test-3072-public.pem');
const K4096 = fixture('keys', 'test-4096-public.pem');
let dir: string;
const file = (name: string, content: string | Uint8Array) => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};
const good = () => signDelivery(payloadText('cli-job'), privatePem(2048));

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'jobhook-cli-'));
});

describe('jobhook verify: input forms', () => {
  it('a capture object with a text body', async () => {
    const r = await cli(['verify', '--key', K2048, file('capture.json', JSON.stringify(good()))]);
    expect(r).toEqual({ code: 0, stdout: `VALID cli-job orjson ${K2048}\n`, stderr: '' });
  });

  it('a capture object with bodyBase64 (exact bytes)', async () => {
    const d = good();
    const r = await cli([
      'verify',
      '--key',
      K2048,
      file(
        'b64.json',
        JSON.stringify({ headers: d.headers, bodyBase64: Buffer.from(d.body).toString('base64') }),
      ),
    ]);
    expect(r.code).toBe(0);
  });

  it('a raw HTTP/1.1 request dump, with Content-Length or chunked', async () => {
    const d = good();
    const head = `POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(d.headers)
      .map(([k, v]) => `${k}: ${v}`)
      .join('\r\n')}\r\n`;
    const bytes = Buffer.from(d.body);
    const plain = file(
      'req.http',
      Buffer.concat([Buffer.from(`${head}Content-Length: ${bytes.length}\r\n\r\n`), bytes]),
    );
    expect((await cli(['verify', '--key', K2048, plain])).stdout).toMatch(/^VALID cli-job/);
    const chunks = Buffer.concat([
      Buffer.from(`${(100).toString(16)}\r\n`),
      bytes.subarray(0, 100),
      Buffer.from(`\r\n${(bytes.length - 100).toString(16)}\r\n`),
      bytes.subarray(100),
      Buffer.from('\r\n0\r\n\r\n'),
    ]);
    const chunked = file(
      'chunked.http',
      Buffer.concat([Buffer.from(`${head}Transfer-Encoding: chunked\r\n\r\n`), chunks]),
    );
    expect((await cli(['verify', '--key', K2048, chunked])).stdout).toMatch(/^VALID cli-job/);
  });

  it('a bare JSON body needs --signature', async () => {
    const d = good();
    const body = file('body.json', d.body);
    expect(
      (await cli(['verify', '--key', K2048, '--signature', d.headers['X-Service-Signature']!, body])).code,
    ).toBe(0);
    const missing = await cli(['verify', '--key', K2048, body]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--signature/);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('standard input with -', async () => {
    const r = await cli(['verify', '--key', K2048, '-'], { stdin: JSON.stringify(good()) });
    expect(r.code).toBe(0);
  });

  it('deliveries signed by Python, as JSONL, with three keys (rotation)', async () => {
    const all = deliveries();
    const jsonl = file(
      'python.jsonl',
      all.map((d) => JSON.stringify({ headers: d.headers, body: d.body })).join('\n') + '\n',
    );
    const r = await cli(['verify', '--key', K2048, '--key', K3072, '--key', K4096, '--json', jsonl]);
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { index: number; keyIndex: number; valid: boolean });
    expect(lines).toHaveLength(all.length);
    lines.forEach((l, k) => expect(l.keyIndex).toBe([2048, 3072, 4096].indexOf(all[k]!.keyBits)));
  });
});

describe('jobhook verify: results and exit codes', () => {
  it('--json gives one object per delivery with the documented shape; one invalid → exit 1', async () => {
    const d = good();
    const lines = [JSON.stringify(d), JSON.stringify({ ...d, body: d.body.replace('Grüße', 'Gruss') })];
    const r = await cli(['verify', '--key', K2048, '--json', file('two.jsonl', lines.join('\n'))]);
    expect(r.code).toBe(1);
    const out = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(out[0]).toEqual({
      source: join(dir, 'two.jsonl'),
      index: 0,
      valid: true,
      code: null,
      dialect: 'orjson',
      keyIndex: 0,
      jobId: 'cli-job',
    });
    expect(out[1]).toEqual({
      source: join(dir, 'two.jsonl'),
      index: 1,
      valid: false,
      code: 'SIGNATURE_INVALID',
      dialect: null,
      keyIndex: null,
      jobId: null,
    });
  });

  it('text output names the code and message of an invalid delivery', async () => {
    const d = good();
    const r = await cli([
      'verify',
      '--key',
      K2048,
      file(
        'trunc.json',
        JSON.stringify({
          ...d,
          headers: { 'X-Service-Signature': d.headers['X-Service-Signature']!.slice(4) },
        }),
      ),
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^INVALID SIGNATURE_MALFORMED The signature has 508 hex digits/);
  });

  it('rotation: the second key verifies and is named', async () => {
    const r = await cli(['verify', '--key', K3072, '--key', K2048, file('rot.json', JSON.stringify(good()))]);
    expect(r.stdout).toBe(`VALID cli-job orjson ${K2048}\n`);
  });

  it('--dialect restricts the dialects tried', async () => {
    const f = file('dialect.json', JSON.stringify(good()));
    expect((await cli(['verify', '--key', K2048, '--dialect', 'python', f])).code).toBe(1);
    expect((await cli(['verify', '--key', K2048, '--dialect', 'auto', f])).code).toBe(0);
    expect((await cli(['verify', '--key', K2048, '--dialect', 'json5', f])).code).toBe(2);
  });

  it.each([
    [['verify', '--key', K2048, '/nonexistent/file.json'], /ENOENT|no such file/],
    [['verify', 'x.json'], /--key FILE is required/],
    [
      ['verify', '--key', K2048, '--bogus'],
      /^jobhook verify: unknown option --bogus; 'jobhook verify --help' lists the options$/m,
    ],
    [['verify', '--key', '/nonexistent.pem', 'x'], /ENOENT|no such file/],
  ])('usage and I/O errors exit 2 with one line: %j', async (argv, message) => {
    const r = await cli(argv);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('10,000 deliveries in one batch, progress on stderr only on a TTY', async () => {
    const signed = Array.from({ length: 100 }, (_, k) =>
      JSON.stringify(
        signDelivery(payloadText(`batch-${k}`, `,"pad":"${'x'.repeat(1200)}"`), privatePem(2048)),
      ),
    );
    const lines = Array.from({ length: 10_000 }, (_, k) => signed[k % 100]!);
    const f = file('batch.jsonl', lines.join('\n'));
    const quiet = await cli(['verify', '--key', K2048, f]);
    expect(quiet.code).toBe(0);
    expect(quiet.stdout.trim().split('\n')).toHaveLength(10_000);
    expect(quiet.stderr).toBe('');
    const tty = await cli(['verify', '--key', K2048, f], { tty: true });
    expect(tty.stderr).toContain('verified 10000/10000, 0 invalid');
  });
});

describe('jobhook verify: input echoed to the terminal has its control characters escaped', () => {
  /** C0 (but the line feeds that end lines), DEL, C1, bidi embeddings/overrides/isolates. */
  const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

  it('a job id with bidi overrides (valid: not control characters) is shown escaped; --json keeps it losslessly', async () => {
    const jobId = 'invoice-\u202egpj.exe\u2066x\u2069';
    const f = file('bidi.json', JSON.stringify(signDelivery(payloadText(jobId), privatePem(2048))));
    const text = await cli(['verify', '--key', K2048, f]);
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(`VALID invoice-\\u202egpj.exe\\u2066x\\u2069 orjson ${K2048}\n`);
    const json = await cli(['verify', '--key', K2048, '--json', f]);
    expect(json.stdout).not.toMatch(UNSAFE);
    expect(json.stdout).toContain('invoice-\\u202egpj.exe');
    expect((JSON.parse(json.stdout) as { jobId: string }).jobId).toBe(jobId);
  });

  it('header values quoted in a message: ESC, BEL, C1 CSI, RLO', async () => {
    const hostile = 'SHA1\u001b]0;pwned\u0007\u009b31m\u202e\u007f';
    const f = file(
      'ctl.json',
      JSON.stringify({
        headers: { 'X-Service-Signature': 'ab', 'X-Service-Hash-Algorithm': hostile },
        body: '{}',
      }),
    );
    const r = await cli(['verify', '--key', K2048, f]);
    expect(r.code).toBe(1);
    expect(r.stdout).not.toMatch(UNSAFE);
    expect(r.stdout).toBe(
      // The library quotes the header as it quotes every sender's text (base/text.ts): C0 and DEL as \\xNN, the rest \\uNNNN.
      'INVALID ALGORITHM_UNSUPPORTED The hash algorithm header says "SHA1\\x1b]0;pwned\\x07\\u009b31m\\u202e\\x7f"; only SHA256 is supported.\n',
    );
  });

  it('file names and input quoted in errors on stderr', async () => {
    const missing = await cli(['verify', '--key', K2048, join(dir, 'no\u001b[2Jsuch\u202e.json')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).not.toMatch(UNSAFE);
    expect(missing.stderr).toContain('no\\x1b[2Jsuch\\u202e.json');
    const header = file('hdr\u009b.http', 'POST / HTTP/1.1\r\nX-Evil : \u001b[31mred\u0085\r\n\r\n{}');
    const dump = await cli(['verify', '--key', K2048, header]);
    expect(dump.code).toBe(2);
    expect(dump.stderr).not.toMatch(UNSAFE);
    expect(dump.stderr).toContain('hdr\\u009b.http: malformed header line "X-Evil : \\u001b[31mred\\u0085"');
    const unknown = await cli(['\u001b[2Jverify']);
    expect(unknown.stderr).toBe("jobhook: unknown command '\\x1b[2Jverify' (did you mean verify?)\n");
  });
});
