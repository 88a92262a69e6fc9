/**
 * HAR files read by `jobhook verify` and `jobhook explain`: a file mitmproxy wrote
 * (fixtures/har), and files in the shapes other tools write them (Chrome DevTools over
 * HTTP/2; a proxy that keeps the body's bytes in base64), built here around deliveries
 * signed with the fixture key.
 */
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { signDelivery } from '../../../src/index.js';
import { payloadText } from '../../helpers/deliveries.js';
import { privatePem } from '../../helpers/keys.js';
import { fixture, ROOT } from '../../helpers/paths.js';
import { cli, scratchFiles } from './run.js';

const K2048 = fixture('keys', 'test-2048-public.pem');
const MITMPROXY = fixture('har', 'mitmproxy-8.1.1.har');
const file = scratchFiles('jobhook-har-');

/** `--json` lines as objects. */
const results = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map(
      (l) => JSON.parse(l) as { index: number; valid: boolean; code: string | null; jobId: string | null },
    );

/** Exit 2 with one line on stderr matching `message`. */
const refused = (r: { code: number; stdout: string; stderr: string }, message: RegExp) => {
  expect(r).toMatchObject({ code: 2, stdout: '' });
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(message);
};

/** A delivery signed with the fixture key; its body has non-ASCII text and floats such as 1.0. */
function delivery(jobId: string) {
  return signDelivery(payloadText(jobId), privatePem(2048));
}

/** An entry as Chrome DevTools exports it for a request over HTTP/2: lowercase names, pseudo-headers first. */
function devtoolsEntry(method: string, headers: Record<string, string>, body?: string) {
  return {
    _initiator: { type: 'script' },
    _priority: 'High',
    _resourceType: 'fetch',
    cache: {},
    connection: '443',
    request: {
      method,
      url: 'https://hooks.example.com/webhooks/gateway',
      httpVersion: 'http/2.0',
      headers: [
        { name: ':authority', value: 'hooks.example.com' },
        { name: ':method', value: method },
        { name: ':path', value: '/webhooks/gateway' },
        { name: ':scheme', value: 'https' },
        ...Object.entries(headers).map(([name, value]) => ({ name: name.toLowerCase(), value })),
      ],
      queryString: [],
      cookies: [],
      headersSize: -1,
      bodySize: body === undefined ? 0 : Buffer.byteLength(body),
      ...(body === undefined ? {} : { postData: { mimeType: 'application/json', text: body } }),
    },
    response: {
      status: 200,
      statusText: '',
      httpVersion: 'http/2.0',
      headers: [],
      cookies: [],
      content: { size: 0, mimeType: 'application/json' },
      redirectURL: '',
      headersSize: -1,
      bodySize: -1,
    },
    serverIPAddress: '203.0.113.7',
    startedDateTime: '2026-05-04T10:00:00.000Z',
    time: 12.5,
    timings: { blocked: 1, dns: -1, ssl: -1, connect: -1, send: 0.1, wait: 10, receive: 1.4 },
  };
}

const har = (entries: object[], creator = { name: 'WebInspector', version: '537.36' }) => ({
  log: { version: '1.2', creator, pages: [], entries },
});

describe('a HAR file mitmproxy wrote (reverse proxy in front of a jobhook receiver)', () => {
  it('verify: the signed POSTs are deliveries, the GET and the unsigned POST are left out; the gzip one holds its body decoded', async () => {
    const r = await cli(['verify', '--key', K2048, '--json', MITMPROXY]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(results(r.stdout).map((x) => [x.index, x.valid, x.jobId])).toEqual([
      [1, true, 'har-mitmproxy-plain'],
      [2, true, 'har-mitmproxy-gzip'],
      [4, true, 'har-mitmproxy-plain'],
    ]);
  });

  it('explain takes one entry with --index; without it, or with an index that holds none, it says which there are', async () => {
    const one = await cli(['explain', '--key', K2048, '--index', '2', MITMPROXY]);
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^VALID\n/);
    expect(one.stdout).toMatch(/dialect orjson\s+sha256 [0-9a-f]{64}\s+VERIFIES with key 0/);
    refused(
      await cli(['explain', '--key', K2048, MITMPROXY]),
      /explain takes one delivery; the input holds more than one: pick one with --index N/,
    );
    refused(
      await cli(['explain', '--key', K2048, '--index', '3', MITMPROXY]),
      /no delivery with --index 3 in the input \(its deliveries: 1, 2, 4\)/,
    );
  });
});

describe('HAR files in the shapes other tools write', () => {
  it('Chrome DevTools over HTTP/2: lowercase names, pseudo-headers left out, the other requests of the page skipped', async () => {
    const d = delivery('har-devtools');
    const entries = [
      devtoolsEntry('GET', { accept: '*/*' }),
      devtoolsEntry('POST', { 'content-type': 'application/json' }, '{"event":"page_view"}'),
      devtoolsEntry('POST', d.headers, d.body),
    ];
    const r = await cli(['verify', '--key', K2048, '--json', file('devtools.har', har(entries))]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(results(r.stdout)).toEqual([
      expect.objectContaining({ index: 2, valid: true, jobId: 'har-devtools' }),
    ]);
    const text = await cli([
      'verify',
      '--key',
      K2048,
      file('devtools-compact.har', JSON.stringify(har(entries))),
    ]);
    expect(text.stdout).toBe(`VALID har-devtools orjson ${K2048}\n`);
  });

  it('a proxy that keeps the bytes in base64: a gzip body as it was on the wire is decoded; a plain one is read as it is', async () => {
    const gz = delivery('har-base64-gzip');
    const plain = delivery('har-base64-plain');
    const entry = (headers: Record<string, string>, bytes: Uint8Array) => ({
      request: {
        method: 'POST',
        url: 'http://127.0.0.1:3000/webhooks/gateway',
        httpVersion: 'HTTP/1.1',
        headers: Object.entries(headers).map(([name, value]) => ({ name, value })),
        postData: {
          mimeType: 'application/json',
          text: Buffer.from(bytes).toString('base64'),
          encoding: 'base64',
        },
      },
    });
    const entries = [
      entry({ ...gz.headers, 'Content-Encoding': 'gzip' }, gzipSync(gz.body)),
      entry(plain.headers, Buffer.from(plain.body)),
    ];
    const r = await cli([
      'verify',
      '--key',
      K2048,
      '--json',
      file('base64.har', har(entries, { name: 'Charles Proxy', version: '4.6' })),
    ]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(results(r.stdout).map((x) => [x.index, x.valid, x.jobId])).toEqual([
      [0, true, 'har-base64-gzip'],
      [1, true, 'har-base64-plain'],
    ]);
  });

  it('a body changed on the way is INVALID, and explain says the key opens the signature but no dialect matches', async () => {
    const d = delivery('har-tampered');
    const path = file(
      'tampered.har',
      har([devtoolsEntry('POST', d.headers, d.body.replace('Grüße', 'Grüsse'))]),
    );
    const r = await cli(['verify', '--key', K2048, path]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^INVALID SIGNATURE_INVALID /);
    const e = await cli(['explain', '--key', K2048, path]);
    expect(e.code).toBe(1);
    expect(e.stdout).toMatch(/opens the signature \(right key\)/);
    expect(e.stdout).not.toMatch(/VERIFIES/);
  });

  it('when no entry has the signature header (a proxy renamed it), every POST body is read, and each says the header is missing', async () => {
    const d = delivery('har-renamed');
    const { 'X-Service-Signature': signature, ...rest } = d.headers;
    const path = file(
      'renamed.har',
      har([devtoolsEntry('POST', { ...rest, 'X-Original-Service-Signature': signature! }, d.body)]),
    );
    const r = await cli(['verify', '--key', K2048, '--json', path]);
    expect(r.code).toBe(1);
    expect(results(r.stdout)).toEqual([
      expect.objectContaining({ index: 0, valid: false, code: 'SIGNATURE_MISSING' }),
    ]);
    // --signature-header names the header that carries it.
    const named = await cli([
      'verify',
      '--key',
      K2048,
      '--signature-header',
      'X-Original-Service-Signature',
      path,
    ]);
    expect(named.stdout).toBe(`VALID har-renamed orjson ${K2048}\n`);
  });

  it('refuses what is not a HAR file it can read, with one line that says why', async () => {
    const d = delivery('har-bad');
    const post = (
      postData: object,
      headers: unknown = [{ name: 'X-Service-Signature', value: d.headers['X-Service-Signature'] }],
    ) => har([{ request: { method: 'POST', url: 'http://x/', headers, postData } }]);
    refused(
      await cli(['verify', '--key', K2048, file('broken.har', '{"log": {"entries": [')]),
      /broken\.har: not a HAR file \(/,
    );
    refused(
      await cli(['verify', '--key', K2048, file('no-entries.har', { log: {} })]),
      /no-entries\.har: not a HAR file \(no log\.entries list\)/,
    );
    refused(
      await cli(['verify', '--key', K2048, file('get-only.har', har([devtoolsEntry('GET', {})]))]),
      /holds no POST request with a body/,
    );
    refused(
      await cli([
        'verify',
        '--key',
        K2048,
        file('qp.har', post({ text: d.body, encoding: 'quoted-printable' })),
      ]),
      /HAR entry 1: postData\.encoding "quoted-printable" is not one jobhook reads/,
    );
    refused(
      await cli([
        'verify',
        '--key',
        K2048,
        file('not-base64.har', post({ text: d.body, encoding: 'base64' })),
      ]),
      /HAR entry 1: postData\.text is not base64/,
    );
    refused(
      await cli([
        'verify',
        '--key',
        K2048,
        file('headers.har', post({ text: d.body }, { 'X-Service-Signature': 'x' })),
      ]),
      /HAR entry 1: request\.headers is not a list/,
    );
    refused(
      await cli(['verify', '--key', K2048, file('no-request.har', har([{}]))]),
      /HAR entry 1 has no request object/,
    );
  });

  it('is bounded as the other forms: read whole up to 6 × maxBodyBytes + 1 MiB; a body that decodes past maxBodyBytes is refused', async () => {
    const d = delivery('har-large');
    const big = har([
      devtoolsEntry('POST', d.headers, d.body),
      {
        request: { method: 'GET', url: 'http://x/', headers: [], comment: 'x'.repeat(1024 * 1024 + 70_000) },
      },
    ]);
    refused(
      await cli(['verify', '--key', K2048, '--max-body-bytes', '10000', file('big.har', big)]),
      /big\.har: longer than 1108576 bytes/,
    );
    const bomb = gzipSync(Buffer.alloc(200_000, 0x20));
    const entry = {
      request: {
        method: 'POST',
        url: 'http://x/',
        headers: [...Object.entries(d.headers), ['Content-Encoding', 'gzip']].map(([name, value]) => ({
          name,
          value,
        })),
        postData: { text: bomb.toString('base64'), encoding: 'base64' },
      },
    };
    refused(
      await cli(['verify', '--key', K2048, '--max-body-bytes', '100000', file('bomb.har', har([entry]))]),
      /the body is larger than maxBodyBytes \(100000 bytes\) once decoded \(Content-Encoding: gzip\)/,
    );
  });
});

/**
 * The peak memory (maxRSS, bytes) of `jobhook ARGV` in a process of its own: the CLI from
 * the sources (tsx), which reports its peak as it exits.
 */
function peakRss(argv: string[]): { peak: number; output: string } {
  const report = file(
    'report-peak.mjs',
    "process.on('exit', () => process.stderr.write(`\\npeak ${process.resourceUsage().maxRSS * 1024}\\n`));\n",
  );
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--import', report, join(ROOT, 'src', 'cli.ts'), ...argv],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  const peak = Number(/\npeak (\d+)\n/.exec(run.stderr)?.[1]);
  expect(peak, run.stderr).toBeGreaterThan(0);
  return { peak, output: run.stdout + run.stderr.replace(/\n?\npeak \d+\n$/, '') };
}

describe('hostile HAR files and capture objects cost at most 10 × their size', () => {
  const d = delivery('har-hostile');
  const headers = Object.entries(d.headers).map(([name, value]) => ({ name, value }));
  const MB = 8_000_000;
  /** A HAR file of about `bytes` with one signed delivery and `junk` (JSON text) beside its entries. */
  const harWith = (name: string, junk: string) =>
    file(
      name,
      `{"log":{"version":"1.2","entries":[${JSON.stringify({ request: { method: 'POST', url: 'http://x/', headers, postData: { text: d.body } } })}],"pages":${junk}}}`,
    );
  const entry = JSON.stringify({
    request: {
      method: 'POST',
      headers: [{ name: 'X-Service-Signature', value: 'ab' }],
      postData: { text: '{}' },
    },
  });
  const inputs: Array<[string, () => string, RegExp]> = [
    [
      '8 MB of nested arrays beside the entries',
      () => harWith('deep.har', '['.repeat(MB / 2) + ']'.repeat(MB / 2)),
      /not a HAR file \(Nesting deeper than 1000 levels at byte \d+\)/,
    ],
    ['8 MB of empty arrays', () => harWith('wide.har', `[${'[],'.repeat(MB / 3)}[]]`), /^VALID har-hostile /],
    [
      '8 MB of empty objects',
      () => harWith('objects.har', `[${'{},'.repeat(MB / 3)}{}]`),
      /^VALID har-hostile /,
    ],
    [
      '8 MB of small POST entries, each a delivery',
      () =>
        file(
          'posts.har',
          `{"log":{"entries":[${Array(Math.floor(MB / (entry.length + 1)))
            .fill(entry)
            .join(',')}]}}`,
        ),
      /^INVALID SIGNATURE_MALFORMED /,
    ],
    [
      'a capture object with 8 MB of empty arrays beside its body',
      () =>
        file(
          'capture.json',
          `{"headers":${JSON.stringify(d.headers)},"body":${JSON.stringify(d.body)},"x":[${'[],'.repeat(MB / 3)}[]]}`,
        ),
      /^VALID har-hostile /,
    ],
    [
      'a JSON lines file whose first line holds 8 MB of empty arrays beside its body',
      () =>
        file(
          'lines.jsonl',
          `{"headers":${JSON.stringify(d.headers)},"body":${JSON.stringify(d.body)},"x":[${'[],'.repeat(MB / 3)}[]]}\n${JSON.stringify(d)}\n`,
        ),
      /^VALID har-hostile .*\nVALID har-hostile /,
    ],
  ];

  it.each(inputs)(
    '%s: verify and explain stay within 10 × the file',
    (_, make, outcome) => {
      const path = make();
      const size = statSync(path).size;
      const small = file('small.har', har([devtoolsEntry('POST', d.headers, d.body)]));
      for (const command of ['verify', 'explain']) {
        const argv = [command, '--key', K2048, ...(command === 'explain' ? ['--index', '0'] : [])];
        const base = peakRss([...argv, small]).peak;
        const run = peakRss([...argv, path]);
        expect(run.peak - base, `${command}: ${run.output}`).toBeLessThan(10 * size);
        if (command === 'verify') expect(run.output).toMatch(outcome);
      }
    },
    240_000,
  );
});
