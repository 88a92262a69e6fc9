/**
 * examples/lambda/handler.ts against the packed package, its handler called directly
 * with the events API Gateway (REST API v1, HTTP API v2) and function URLs send, plain,
 * base64-encoded and gzip-encoded, with the Redis store on a real server.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { delivery, exampleApp, PUBLIC_KEY, TSX } from './harness.js';
import { httpApiEvent, restApiEvent } from './lambda-events.js';

const redisUrl = inject('redisUrl');
if (redisUrl === '' && process.env.CI === 'true')
  throw new Error('examples/lambda needs Redis (redis-server), which CI installs');
if (redisUrl === '')
  console.warn(
    '\n[jobhook] examples/lambda skipped: no Redis (install redis-server or set JOBHOOK_TEST_REDIS_URL)\n',
  );

/** Calls the example's exported handler once per event, in order, in a process of its own; its results. */
const DRIVER = `import { readFileSync } from 'node:fs';
import { handler } from './handler.js';
const events = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const results = [];
for (const event of events) results.push(await handler(event));
process.stdout.write('RESULTS ' + JSON.stringify(results) + '\\n');
process.exit(0);
`;

describe.skipIf(redisUrl === '')('examples/lambda', () => {
  let dir: string;
  let remove: () => void;
  beforeAll(async () => {
    ({ dir, remove } = await exampleApp('lambda'));
    writeFileSync(join(dir, 'driver.ts'), DRIVER);
  }, 15 * 60_000);
  afterAll(() => remove?.());

  function invoke(events: object[]): {
    results: Array<{ statusCode: number; headers: Record<string, string>; body: string }>;
    output: string;
  } {
    const file = join(dir, `events-${Date.now()}.json`);
    writeFileSync(file, JSON.stringify(events));
    const output = execFileSync(process.execPath, [TSX, 'driver.ts', file], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, GATEWAY_PUBLIC_KEY: PUBLIC_KEY, REDIS_URL: redisUrl },
    });
    const line = output.split('\n').find((l) => l.startsWith('RESULTS '));
    if (line === undefined) throw new Error(`no results:\n${output}`);
    return { results: JSON.parse(line.slice('RESULTS '.length)) as never, output };
  }
  const answer = (r: { statusCode: number; body: string }) => ({
    statusCode: r.statusCode,
    body: JSON.parse(r.body) as { status?: string; job_id?: string; error?: { code: string } },
  });

  it('REST API, HTTP API and function URL events, plain, base64 and gzip: genuine → 200 processed, again → duplicate, tampered → 401', () => {
    const gzip = (d: ReturnType<typeof delivery>) => ({
      body: gzipSync(d.body),
      headers: { ...d.headers, 'Content-Encoding': 'gzip' },
    });
    const cases = [
      ['REST API (v1), text', (d: ReturnType<typeof delivery>) => restApiEvent(d, false)],
      [
        'REST API (v1), base64 (binary media types)',
        (d: ReturnType<typeof delivery>) => restApiEvent(d, true),
      ],
      ['REST API (v1), gzip, base64', (d: ReturnType<typeof delivery>) => restApiEvent(gzip(d), true)],
      ['HTTP API (v2), text', (d: ReturnType<typeof delivery>) => httpApiEvent(d, false)],
      ['HTTP API (v2), gzip, base64', (d: ReturnType<typeof delivery>) => httpApiEvent(gzip(d), true)],
      ['function URL, text', (d: ReturnType<typeof delivery>) => httpApiEvent(d, false, true)],
      ['function URL, gzip, base64', (d: ReturnType<typeof delivery>) => httpApiEvent(gzip(d), true, true)],
    ] as const;
    const events: object[] = [];
    const expected: Array<[string, ReturnType<typeof answer>]> = [];
    for (const [name, make] of cases) {
      const d = delivery('lambda');
      events.push(make(d), make(d), make({ ...d, body: d.body.replace('Grüße', 'Gruesse') }));
      expected.push(
        [`${name}: genuine`, { statusCode: 200, body: { status: 'processed', job_id: d.jobId } }],
        [`${name}: again`, { statusCode: 200, body: { status: 'duplicate', job_id: d.jobId } }],
        [
          `${name}: tampered`,
          {
            statusCode: 401,
            body: { error: expect.objectContaining({ code: 'SIGNATURE_INVALID' }) as never },
          },
        ],
      );
    }
    const { results, output } = invoke(events);
    expect(results.map((r, i) => [expected[i]![0], answer(r)])).toEqual(expected);
    expect(output.match(/^saved /gm)).toHaveLength(cases.length);
    expect(results[0]!.headers['content-type']).toMatch(/^application\/json/);
  });

  it('a duplicate that arrives through another kind of event (another instance, the same Redis) is still a duplicate', () => {
    const d = delivery('lambda-cross');
    const { results } = invoke([restApiEvent(d, false), httpApiEvent(d, false, true)]);
    expect(results.map((r) => answer(r).body.status)).toEqual(['processed', 'duplicate']);
  });
});
