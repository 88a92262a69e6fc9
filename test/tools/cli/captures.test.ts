import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { signDelivery } from '../../../src/index.js';
import { payloadText } from '../../helpers/deliveries.js';
import { privatePem } from '../../helpers/keys.js';
import { fixture } from '../../helpers/paths.js';
import { cli } from './run.js';

const K2048 = fixture('keys', 'test-2048-public.pem');
let dir: string;
const file = (name: string, content: string | Uint8Array) => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};
const d = signDelivery(payloadText('dump-job'), privatePem(2048));
const body = Buffer.from(d.body);
const head = (extra: string, eol = '\r\n') =>
  [
    'POST /webhooks HTTP/1.1',
    'Host: 127.0.0.1',
    ...Object.entries(d.headers).map(([k, v]) => `${k}: ${v}`),
    ...(extra ? [extra] : []),
  ].join(eol) +
  eol +
  eol;
/** A raw HTTP/1.1 request dump with a chunked body made of `framing`. */
const chunked = (name: string, ...framing: (string | Buffer)[]) =>
  file(
    name,
    Buffer.concat([
      Buffer.from(head('Transfer-Encoding: chunked')),
      ...framing.map((f) => (typeof f === 'string' ? Buffer.from(f) : f)),
    ]),
  );
const verify = (path: string, ...flags: string[]) => cli(['verify', '--key', K2048, ...flags, path]);
/** Exit 2 with one line on stderr matching `message`. */
const refused = (r: { code: number; stdout: string; stderr: string }, message: RegExp) => {
  expect(r.code).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(message);
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'jobhook-captures-'));
});

describe('raw HTTP dumps: chunked bodies are read with size and truncation checks (RFC 9112 §7.1)', () => {
  it('a 90-byte dump declaring a chunk of 0xfffffff bytes is refused at once as truncated, nothing zero-filled', async () => {
    const dump =
      'POST /wh HTTP/1.1\r\nTransfer-Encoding: chunked\r\nX-Service-Signature: ab\r\n\r\nfffffff\r\n{"a":1}';
    expect(Buffer.byteLength(dump)).toBe(90);
    refused(
      await verify(file('huge-chunk.http', dump)),
      /chunk 1: it declares 268435455 bytes \(0xfffffff\) but only 7 follow: the capture is truncated/,
    );
  });

  it('a chunk size of any number of hex digits is read without overflow', async () => {
    refused(
      await verify(chunked('overflow.http', `${'f'.repeat(40)}\r\nabc\r\n0\r\n\r\n`)),
      /chunk 1: it declares a size of 40 hex digits but only 10 follow: the capture is truncated/,
    );
    // Leading zeros are not significant.
    const zeros = chunked(
      'zeros.http',
      `${'0'.repeat(30)}${body.length.toString(16)}\r\n`,
      body,
      '\r\n0000\r\n\r\n',
    );
    expect((await verify(zeros)).stdout).toMatch(/^VALID dump-job/);
  });

  it('a chunk whose data stops short is an error that says so', async () => {
    refused(
      await verify(chunked('short.http', `${body.length.toString(16)}\r\n`, body.subarray(0, 100))),
      new RegExp(
        `chunk 1: it declares ${body.length} bytes .* but only 100 follow: the capture is truncated`,
      ),
    );
    refused(
      await verify(chunked('no-crlf.http', `${body.length.toString(16)}\r\n`, body)),
      /chunk 1: the capture ends after its \d+ bytes of data \(truncated/,
    );
    refused(
      await verify(chunked('no-last.http', `${body.length.toString(16)}\r\n`, body, '\r\n')),
      /chunk 2: the capture ends before it \(truncated: no last chunk "0"\)/,
    );
  });

  it('data longer than its chunk size is an error, not a silent skip', async () => {
    refused(
      await verify(chunked('mismatch.http', '10\r\n', body, '\r\n0\r\n\r\n')),
      /chunk 1: its 16 bytes \(0x10\) of data are not followed by CRLF: the size does not match the data/,
    );
  });

  it('a body over maxBodyBytes is refused while it is read; --max-body-bytes sets the limit', async () => {
    const half = Math.ceil(body.length / 2);
    const two = chunked(
      'limit.http',
      `${half.toString(16)}\r\n`,
      body.subarray(0, half),
      `\r\n${(body.length - half).toString(16)}\r\n`,
      body.subarray(half),
      '\r\n0\r\n\r\n',
    );
    expect((await verify(two)).code).toBe(0);
    refused(
      await verify(two, '--max-body-bytes', String(body.length - 1)),
      new RegExp(
        `the chunked body is larger than maxBodyBytes \\(${body.length - 1} bytes\\).*--max-body-bytes`,
      ),
    );
    expect((await verify(two, '--max-body-bytes', String(body.length))).code).toBe(0);
    refused(await verify(two, '--max-body-bytes', 'lots'), /--max-body-bytes must be an integer/);
  });

  it('chunk extensions (tokens and quoted strings) are checked and ignored; trailer fields are discarded', async () => {
    const half = 100;
    const ok = chunked(
      'ext.http',
      `${half.toString(16)} ; name ; q="a;b \\" c"\r\n`,
      body.subarray(0, half),
      `\r\n${(body.length - half).toString(16)};x=y\r\n`,
      body.subarray(half),
      '\r\n0;last\r\nX-Trailer: t\r\nX-Service-Signature: 00\r\n\r\n',
    );
    const r = await verify(ok);
    expect(r).toEqual({ code: 0, stdout: `VALID dump-job orjson ${K2048}\n`, stderr: '' });
    refused(
      await verify(chunked('bad-ext.http', `${body.length.toString(16)} junk\r\n`, body, '\r\n0\r\n\r\n')),
      /chunk 1: a malformed chunk extension/,
    );
    refused(
      await verify(
        chunked('open-quote.http', `${body.length.toString(16)};q="abc\r\n`, body, '\r\n0\r\n\r\n'),
      ),
      /chunk 1: an unterminated quoted chunk extension value/,
    );
    refused(
      await verify(
        chunked(
          'ext-flood.http',
          `${body.length.toString(16)};${'e'.repeat(20_000)}\r\n`,
          body,
          '\r\n0\r\n\r\n',
        ),
      ),
      /chunk extensions longer than 16384 bytes/,
    );
    refused(
      await verify(
        chunked('bad-trailer.http', `${body.length.toString(16)}\r\n`, body, '\r\n0\r\nnot a field\r\n\r\n'),
      ),
      /malformed trailer line "not a field"/,
    );
    refused(
      await verify(chunked('cut-trailer.http', `${body.length.toString(16)}\r\n`, body, '\r\n0\r\nX-Tr')),
      /ends inside the trailer section \(truncated\)/,
    );
  });

  it('bare LF line ends are accepted (RFC 9112 §2.2); the final CRLF may be missing at the end of the capture', async () => {
    const lf = file(
      'lf.http',
      Buffer.concat([
        Buffer.from(head('Transfer-Encoding: chunked', '\n')),
        Buffer.from(`${body.length.toString(16)}\n`),
        body,
        Buffer.from('\n0\n'),
      ]),
    );
    expect((await verify(lf)).stdout).toMatch(/^VALID dump-job/);
  });

  it('Transfer-Encoding other than a single final chunked is refused; it overrides Content-Length', async () => {
    const gzip = file(
      'gzip.http',
      Buffer.concat([Buffer.from(head('Transfer-Encoding: gzip, chunked')), body]),
    );
    refused(await verify(gzip), /only chunked is read, not "gzip"/);
    const twice = file(
      'twice.http',
      Buffer.concat([Buffer.from(head('Transfer-Encoding: chunked, chunked')), body]),
    );
    refused(await verify(twice), /chunked applied more than once/);
    refused(
      await verify(file('te-empty.http', Buffer.concat([Buffer.from(head('Transfer-Encoding: ')), body]))),
      /Transfer-Encoding "": no coding named/,
    );
    const both = file(
      'both.http',
      Buffer.concat([
        Buffer.from(head(`Content-Length: 5\r\nTransfer-Encoding: chunked`)),
        Buffer.from(`${body.length.toString(16)}\r\n`),
        body,
        Buffer.from('\r\n0\r\n\r\n'),
      ]),
    );
    expect((await verify(both)).code).toBe(0);
  });

  it('Content-Length: a truncated body is an error; an invalid value is refused', async () => {
    refused(
      await verify(
        file(
          'cl-short.http',
          Buffer.concat([Buffer.from(head(`Content-Length: ${body.length}`)), body.subarray(0, 50)]),
        ),
      ),
      new RegExp(
        `Content-Length is ${body.length} but only 50 bytes follow the headers: the capture is truncated`,
      ),
    );
    refused(
      await verify(file('cl-hex.http', Buffer.concat([Buffer.from(head('Content-Length: 0x10')), body]))),
      /invalid Content-Length "0x10"/,
    );
    const same = file(
      'cl-list.http',
      Buffer.concat([Buffer.from(head(`Content-Length: ${body.length}, ${body.length}`)), body]),
    );
    expect((await verify(same)).code).toBe(0);
  });

  it('header lines: whitespace before the colon, CR inside a value and leading whitespace are refused; obs-fold is a space', async () => {
    refused(
      await verify(file('ws-colon.http', Buffer.concat([Buffer.from(head('X-Bad : 1')), body]))),
      /malformed header line "X-Bad : 1"/,
    );
    refused(
      await verify(file('cr.http', Buffer.concat([Buffer.from(head('X-Bad: a\rb')), body]))),
      /holds a CR or NUL/,
    );
    const folded = head('X-Long: a\r\n b');
    expect((await verify(file('fold.http', Buffer.concat([Buffer.from(folded), body])))).code).toBe(0);
    refused(
      await verify(file('lead.http', Buffer.concat([Buffer.from('POST / HTTP/1.1\r\n X: 1\r\n\r\n'), body]))),
      /whitespace before the first header line/,
    );
  });
});

describe('JSON lines are streamed', () => {
  const line = (k: number) =>
    JSON.stringify({ headers: { 'X-Service-Signature': 'ab' }, body: `{"job_id":"line-${k}"}` });

  it('150,000 lines: one result each (no "Maximum call stack size exceeded")', async () => {
    const n = 150_000;
    const path = file('many.jsonl', Array.from({ length: n }, (_, k) => line(k)).join('\n') + '\n');
    const r = await verify(path);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    const out = r.stdout.split('\n');
    expect(out).toHaveLength(n + 1);
    expect(out[0]).toBe(
      "INVALID SIGNATURE_MALFORMED The signature has 2 hex digits but the key's modulus needs 512: it was truncated or padded, or signed with another key.",
    );
    expect(out[n]).toBe('');
  });

  it('the first results are written before the input has been read', async () => {
    const chunks = 400;
    const perChunk = 50;
    let pulled = 0;
    let pulledAtFirstOutput: number | undefined;
    async function* stdin() {
      for (let c = 0; c < chunks; c++) {
        pulled++;
        yield new TextEncoder().encode(
          Array.from({ length: perChunk }, (_, k) => line(c * perChunk + k) + '\n').join(''),
        );
      }
    }
    const r = await cli(['verify', '--key', K2048, '--jsonl', '-'], {
      stdin: stdin(),
      onStdout: () => void (pulledAtFirstOutput ??= pulled),
    });
    expect(r.stdout.trim().split('\n')).toHaveLength(chunks * perChunk);
    // Results leave in blocks of 64 KiB: the first after about 550 lines, ~11 chunks of 400.
    expect(pulledAtFirstOutput).toBeDefined();
    expect(pulledAtFirstOutput!).toBeLessThan(chunks / 4);
  });

  it('several capture objects on lines of a file not named .jsonl are streamed too; a line splits across reads', async () => {
    const signed = JSON.stringify(d);
    const text = `${signed}\n\n${signed}\r\n${line(1)}\n`;
    async function* stdin() {
      const bytes = new TextEncoder().encode(text);
      for (let k = 0; k < bytes.length; k += 7) yield bytes.subarray(k, k + 7);
    }
    const r = await cli(['verify', '--key', K2048, '-'], { stdin: stdin() });
    expect(r.stdout.split('\n')).toEqual([
      `VALID dump-job orjson ${K2048}`,
      `VALID dump-job orjson ${K2048}`,
      expect.stringMatching(/^INVALID SIGNATURE_MALFORMED/),
      '',
    ]);
  });

  it('a malformed line stops the run with its line number, after the results before it', async () => {
    const r = await verify(file('bad-line.jsonl', `${line(0)}\n${line(1)}\n{"headers":\n`));
    expect(r.code).toBe(2);
    expect(r.stdout.trim().split('\n')).toHaveLength(2);
    expect(r.stderr).toMatch(/bad-line\.jsonl:3: not a JSON capture object/);
  });

  it('a line longer than 6 × maxBodyBytes + 1 MiB is refused before it is held', async () => {
    const r = await verify(
      file(
        'long-line.jsonl',
        `${line(0)}\n${JSON.stringify({ headers: {}, body: 'x'.repeat(1_200_000) })}\n`,
      ),
      '--max-body-bytes',
      '10',
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/long-line\.jsonl:2: a line longer than 1048636 bytes/);
  });
});

describe('the size of an input', () => {
  it('an input that is one capture is read up to 6 × maxBodyBytes + 1 MiB', async () => {
    const body = file('big-body.json', `{"pad":"${'x'.repeat(1_100_000)}"}`);
    const r = await verify(body, '--max-body-bytes', '10', '--signature', 'ab');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /big-body\.json: longer than 1048636 bytes \(more than a capture of a body within maxBodyBytes takes/,
    );
    expect((await verify(body, '--signature', 'ab')).stdout).toMatch(/^INVALID SIGNATURE_MALFORMED/);
  });
});

describe('capture objects read from their bytes', () => {
  it('header values: text, a list joined with ", ", numbers written out; an object, or more than 2,000 headers, refused', async () => {
    const capture = (headers: object) => file('headers.json', JSON.stringify({ headers, body: d.body }));
    const sig = d.headers['X-Service-Signature']!;
    const ok = await verify(
      capture({
        'X-Service-Signature': [sig],
        'X-Service-Hash-Algorithm': 'SHA256',
        'Content-Length': 12,
        x: null,
      }),
    );
    expect(ok.stdout).toMatch(/^VALID dump-job /);
    refused(
      await verify(capture({ 'X-Service-Signature': sig, 'X-Nested': { a: 1 } })),
      /headers\.json: the header "X-Nested" holds an object, not text/,
    );
    const many = Object.fromEntries(Array.from({ length: 2001 }, (_, k) => [`x-${k}`, '']));
    refused(await verify(capture(many)), /headers\.json: more than 2000 headers/);
    // A member named __proto__ is a header like any other, not the object's prototype.
    const proto = `{"headers":{"__proto__":"x","X-Service-Signature":"${sig}"},"body":${JSON.stringify(d.body)}}`;
    expect((await verify(file('proto.json', proto))).stdout).toMatch(/^VALID dump-job /);
  });

  it('a JSON document nested deeper than the verifier takes is no capture: refused, without building it', async () => {
    const deep = `{"headers":{},"body":"{}","x":${'['.repeat(2000)}${']'.repeat(2000)}}`;
    refused(
      await verify(file('deep.jsonl', `${deep}\n`)),
      /deep\.jsonl:1: not a JSON capture object \(Nesting deeper than 1000 levels at byte \d+\)/,
    );
  });
});
