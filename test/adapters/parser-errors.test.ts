/**
 * A body parser in front of jobhook (express.json() with body-parser's 100 kB default)
 * refuses a large delivery before jobhook runs. createParserErrorHandler tells it in one
 * jobhook line with the fix, and answers so that the gateway retries; the fix it prints,
 * followed as written, makes the same 20 MB delivery verify (real Express, supertest).
 */
import express5 from 'express';
import express4 from 'express4';
import supertest from 'supertest';
import { describe, expect, it } from 'vitest';
import { createParserErrorHandler, createReceiver, keepRawBody } from '../../src/express.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';

type ExpressModule = typeof express5;
const versions: Array<[string, ExpressModule]> = [
  ['Express 5', express5],
  ['Express 4', express4 as unknown as ExpressModule],
];

/** A signed delivery whose body is about `bytes` long. */
function large(bytes: number, label: string) {
  return signed(jobId(label), `,"original_response":{"pages":"${'x'.repeat(bytes)}"}`);
}

function post(app: express5.Express, path: string, body: string, headers: Record<string, string>) {
  return supertest(app)
    .post(path)
    .set(headers)
    .serialize((x: unknown) => x as string)
    .send(body);
}

/** The lines a logger was given, by level. */
function lines() {
  const seen: Array<[string, string]> = [];
  const log = {
    warn: (m: string) => void seen.push(['warn', m]),
    error: (m: string) => void seen.push(['error', m]),
    info: (m: string) => void seen.push(['info', m]),
  };
  return { seen, log };
}

/** An app whose JSON parser runs before the receiver, as `parser` sets it up, with the handler after the routes. */
function appWith(
  express: ExpressModule,
  parser: express5.RequestHandler,
  log: ReturnType<typeof lines>['log'],
) {
  const ran: string[] = [];
  const app = express();
  app.use(parser);
  app.post(
    '/webhooks/gateway',
    createReceiver({ publicKey: publicPem(2048), log, onEvent: (_e, { jobId: id }) => void ran.push(id) }),
  );
  app.post('/api/orders', (req, res) => void res.json({ received: req.body as unknown }));
  app.use(createParserErrorHandler({ log }));
  return { app, ran };
}

describe.each(versions)('createParserErrorHandler on %s', (_name, express) => {
  it('a 20 MB delivery refused by express.json() (100 kB): one line with the fix, 500 so the gateway retries; the fix followed gives 200', async () => {
    const before = lines();
    const { app } = appWith(express, express.json(), before.log);
    const d = large(20_000_000, 'parser-20mb');
    const first = await post(app, '/webhooks/gateway', d.body, d.headers);
    expect({ status: first.status, code: (first.body as { error?: { code?: string } }).error?.code }).toEqual(
      {
        status: 500,
        code: 'BODY_UNAVAILABLE',
      },
    );
    const again = await post(app, '/webhooks/gateway', d.body, d.headers);
    expect(again.status).toBe(500);
    // One line for both deliveries (the repeat is counted for the minute's summary).
    expect(before.seen).toHaveLength(1);
    const [level, line] = before.seen[0]!;
    expect(level).toBe('warn');
    expect(line).toMatch(/^jobhook: a body parser refused a delivery of \d+ bytes to "\/webhooks\/gateway"/);
    expect(line).toContain('over 102400 bytes');
    expect(line).toContain('the gateway retries');

    // The fix, as printed: app.use(express.json({ limit: '25mb', verify: keepRawBody })).
    const fix = /app\.use\(express\.json\(\{ limit: '([^']+)', verify: keepRawBody \}\)\)/.exec(line);
    expect(fix, line).not.toBeNull();
    const after = lines();
    const fixed = appWith(express, express.json({ limit: fix![1]!, verify: keepRawBody }), after.log);
    const answer = await post(fixed.app, '/webhooks/gateway', d.body, d.headers);
    expect({ status: answer.status, body: answer.body as unknown }).toEqual({
      status: 200,
      body: { status: 'processed', job_id: JSON.parse(d.body).job_id },
    });
    expect(fixed.ran).toEqual([JSON.parse(d.body).job_id]);
    expect(after.seen).toEqual([]);
  });

  it('a body over maxBodyBytes is answered 413 BODY_TOO_LARGE, as jobhook would, without the line', async () => {
    const { seen, log } = lines();
    const app = express();
    app.use(express.json());
    app.post('/webhooks/gateway', (_req, res) => void res.sendStatus(200));
    app.use(createParserErrorHandler({ log, maxBodyBytes: 1_000_000 }));
    const d = large(1_200_000, 'parser-over');
    const answer = await post(app, '/webhooks/gateway', d.body, d.headers);
    expect({
      status: answer.status,
      code: (answer.body as { error?: { code?: string } }).error?.code,
    }).toEqual({
      status: 413,
      code: 'BODY_TOO_LARGE',
    });
    expect(seen).toEqual([]);
  });

  it("a request without the signature header (another route's) goes on to the next error handler", async () => {
    const { seen, log } = lines();
    const { app } = appWith(express, express.json(), log);
    const answer = await post(app, '/api/orders', JSON.stringify({ x: 'y'.repeat(200_000) }), {
      'content-type': 'application/json',
    });
    expect(answer.status).toBe(413); // Express's own handler: body-parser's 413, not jobhook's
    expect(answer.body).not.toHaveProperty('error.code');
    expect(seen).toEqual([]);
  });

  it('a configured signatureHeader tells the deliveries; an unknown option is refused with its fix', async () => {
    const { seen, log } = lines();
    const app = express();
    app.use(express.json());
    app.post('/hook', (_req, res) => void res.sendStatus(200));
    app.use(createParserErrorHandler({ log, signatureHeader: 'X-Acme-Signature' }));
    const answer = await post(app, '/hook', JSON.stringify({ x: 'y'.repeat(200_000) }), {
      'content-type': 'application/json',
      'x-acme-signature': 'ab',
    });
    expect(answer.status).toBe(500);
    expect(seen).toHaveLength(1);
    expect(() => createParserErrorHandler({ maxBodyByte: 1 } as never)).toThrow(/did you mean maxBodyBytes/);
  });
});
