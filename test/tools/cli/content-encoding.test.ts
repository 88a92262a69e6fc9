/**
 * Captured bodies that are gzip, deflate or br data (a raw HTTP dump of a compressed
 * delivery, a capture object with bodyBase64) are decoded before verify and explain read
 * them, within maxBodyBytes; bodies a tool kept decoded under the original header are
 * read as they are.
 */
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { signDelivery } from '../../../src/index.js';
import { payloadText } from '../../helpers/deliveries.js';
import { privatePem } from '../../helpers/keys.js';
import { fixture } from '../../helpers/paths.js';
import { cli, scratchFiles } from './run.js';

const K2048 = fixture('keys', 'test-2048-public.pem');
const file = scratchFiles('jobhook-encoding-');

const d = signDelivery(payloadText('encoded-job'), privatePem(2048));
/** A raw HTTP/1.1 request dump of `body` sent with `Content-Encoding: coding`. */
const dump = (coding: string, body: Uint8Array) =>
  Buffer.concat([
    Buffer.from(
      [
        'POST /webhooks HTTP/1.1',
        'Host: 127.0.0.1',
        ...Object.entries(d.headers).map(([k, v]) => `${k}: ${v}`),
        `Content-Encoding: ${coding}`,
        `Content-Length: ${body.byteLength}`,
        '',
        '',
      ].join('\r\n'),
    ),
    body,
  ]);
const capture = (headers: Record<string, string>, body: { body: string } | { bodyBase64: string }) =>
  JSON.stringify({ headers: { ...d.headers, ...headers }, ...body });
const VALID = `VALID encoded-job orjson ${K2048}\n`;

describe('Content-Encoding in captures', () => {
  it.each([
    ['gzip', gzipSync(d.body)],
    ['x-gzip', gzipSync(d.body)],
    ['deflate', deflateSync(d.body)],
    ['br', brotliCompressSync(d.body)],
    ['gzip, br', brotliCompressSync(gzipSync(d.body))],
    ['identity', Buffer.from(d.body)],
  ])('a raw HTTP dump with Content-Encoding: %s verifies', async (coding, body) => {
    const path = file(`dump-${coding.replace(/\W+/g, '-')}.http`, dump(coding, body));
    expect(await cli(['verify', '--key', K2048, path])).toMatchObject({ code: 0, stdout: VALID, stderr: '' });
  });

  it('explain reads the decoded body too', async () => {
    const r = await cli([
      'explain',
      '--key',
      K2048,
      file('dump-explain.http', dump('br', brotliCompressSync(d.body))),
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^VALID\n[\s\S]*floats like 1\.0: 2/);
  });

  it('a capture object: bodyBase64 of the wire bytes is decoded; a body kept decoded under the header is read as it is', async () => {
    const wire = file(
      'wire.json',
      capture({ 'content-encoding': 'gzip' }, { bodyBase64: gzipSync(d.body).toString('base64') }),
    );
    expect(await cli(['verify', '--key', K2048, wire])).toMatchObject({ code: 0, stdout: VALID });
    const kept = file('kept.json', capture({ 'content-encoding': 'gzip' }, { body: d.body }));
    expect(await cli(['verify', '--key', K2048, kept])).toMatchObject({ code: 0, stdout: VALID });
  });

  it('refuses a body that is not data of its coding, a coding it does not read, and one that decodes past maxBodyBytes, naming the delivery', async () => {
    const one = (r: { code: number; stderr: string }, message: RegExp) => {
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(message);
    };
    one(
      await cli([
        'verify',
        '--key',
        K2048,
        file('not-gzip.http', dump('gzip', Buffer.from('not gzip at all'))),
      ]),
      /not-gzip\.http: the body is not valid gzip data, as its Content-Encoding says/,
    );
    one(
      await cli(['verify', '--key', K2048, file('zstd.http', dump('zstd', Buffer.from('x')))]),
      /Content-Encoding "zstd": zstd is not one jobhook reads \(gzip, deflate, br\)/,
    );
    const bomb = gzipSync(Buffer.alloc(5_000_000, 0x20));
    one(
      await cli([
        'verify',
        '--key',
        K2048,
        '--max-body-bytes',
        '1000000',
        file('bomb.http', dump('gzip', bomb)),
      ]),
      /bomb\.http: the body is larger than maxBodyBytes \(1000000 bytes\) once decoded/,
    );
    const lines = [
      capture({}, { body: d.body }),
      capture({ 'Content-Encoding': 'br' }, { bodyBase64: Buffer.from('nope').toString('base64') }),
    ].join('\n');
    const r = await cli(['verify', '--key', K2048, file('mixed.jsonl', lines)]);
    one(r, /mixed\.jsonl \(delivery 2\): the body is not valid br data/);
    expect(r.stdout).toBe(VALID); // the delivery before it was verified
  });
});
