/**
 * Receivers for the tests of `jobhook check`, each on a free loopback port with an
 * effects route (GET /effects: the job ids its handler ran, one entry per run): a
 * correct one, and the ways real deployments lose or forge deliveries.
 */
import { createHash, createPublicKey, verify as rsaVerify } from 'node:crypto';
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import express, { type Express, type Request, type Response } from 'express';
import { createVerifier } from '../../../src/index.js';
import { createReceiver, keepRawBody } from '../../../src/express.js';
import { privatePem, publicPem } from '../../helpers/keys.js';
import { listen, type Listening } from '../helpers.js';

/** The TEST-ONLY key the receivers trust, and the private key a check signs with. */
export const PUBLIC_KEY = publicPem(2048);
export const PRIVATE_KEY = privatePem(2048);

export interface TestReceiver {
  /** Where deliveries go. */
  url: string;
  /** GET: a JSON array of the job ids the handler ran. */
  effectsUrl: string;
  ran: string[];
  close: () => Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function serve(app: Express, ran: string[], extra?: () => Promise<void>): Promise<TestReceiver> {
  app.get('/effects', (_req, res) => void res.json(ran));
  const server: Listening = await listen(app);
  return {
    url: `${server.url}/hook`,
    effectsUrl: `${server.url}/effects`,
    ran,
    close: async () => {
      await extra?.();
      await server.close();
    },
  };
}

/** jobhook's Express receiver as the README mounts it. `slowFirstMs` delays the first run of a job with more than 5 pages. */
export async function correctReceiver(options: { slowFirstMs?: number } = {}): Promise<TestReceiver> {
  const ran: string[] = [];
  const receiver = createReceiver({
    publicKey: PUBLIC_KEY,
    onEvent: async (event, { jobId }) => {
      const pages = event.status === 'success' ? (event.output as { pages?: unknown[] }).pages : undefined;
      if (options.slowFirstMs !== undefined && (pages?.length ?? 0) > 5) await sleep(options.slowFirstMs);
      ran.push(jobId);
    },
  });
  const app = express();
  app.post('/hook', receiver);
  return serve(app, ran, () => receiver.close());
}

/** The same receiver behind express.json() with body-parser's default limit (100 kB): the misconfiguration. */
export async function bodyLimitReceiver(): Promise<TestReceiver> {
  const ran: string[] = [];
  const receiver = createReceiver({
    publicKey: PUBLIC_KEY,
    onEvent: async (_event, { jobId }) => void ran.push(jobId),
  });
  const app = express();
  app.use(express.json({ verify: keepRawBody })); // limit left at 100 kB
  app.post('/hook', receiver);
  app.use(
    (err: { status?: number }, _req: Request, res: Response, _next: unknown) =>
      void res.status(err.status ?? 500).json({ error: { code: 'HTTP_ERROR' } }),
  );
  return serve(app, ran, () => receiver.close());
}

/** Keys sorted with JavaScript's default sort, written by JSON.stringify: the naive verifier. */
function sortedStringify(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v === null || typeof v !== 'object') return v;
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
    );
  };
  return JSON.stringify(sort(value), null, 2);
}

/** Verifies JSON.stringify of the parsed body (keys sorted), as the gateway's documented JS snippet does; idempotent. */
export async function stringifyVerifierReceiver(): Promise<TestReceiver> {
  const ran: string[] = [];
  const key = createPublicKey(PUBLIC_KEY);
  const app = express();
  app.use(express.json({ limit: '25mb' }));
  app.post('/hook', (req, res) => {
    const signature = req.get('x-service-signature') ?? '';
    const digest = createHash('sha256').update(sortedStringify(req.body)).digest('hex');
    if (
      !/^[0-9a-f]+$/i.test(signature) ||
      !rsaVerify('sha256', Buffer.from(digest), key, Buffer.from(signature, 'hex'))
    )
      return void res.status(401).send('bad signature');
    const jobId = (req.body as { job_id: string }).job_id;
    if (!ran.includes(jobId)) ran.push(jobId);
    res.send('ok');
  });
  return serve(app, ran);
}

/** A correct receiver behind a proxy that drops X-Service-Signature. */
export async function headerDroppingProxy(): Promise<TestReceiver> {
  const backend = await correctReceiver();
  const target = new URL(backend.url);
  const proxy = await listen((req: IncomingMessage, res: ServerResponse) => {
    const headers = { ...req.headers };
    delete headers['x-service-signature'];
    const upstream = request(
      { host: target.hostname, port: target.port, path: target.pathname, method: req.method, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  return {
    url: `${proxy.url}/hook`,
    effectsUrl: backend.effectsUrl,
    ran: backend.ran,
    close: async () => {
      await proxy.close();
      await backend.close();
    },
  };
}

/** Verifies every delivery properly, then runs it, every time: no idempotency. */
export async function noIdempotencyReceiver(): Promise<TestReceiver> {
  const ran: string[] = [];
  const verifier = createVerifier({ publicKey: PUBLIC_KEY });
  const app = express();
  app.post('/hook', express.raw({ type: () => true, limit: '25mb' }), (req, res) => {
    let jobId: string;
    try {
      jobId = verifier.verify(req.body as Buffer, req.headers).jobId;
    } catch {
      return void res.status(401).json({ error: { code: 'SIGNATURE_INVALID' } });
    }
    ran.push(jobId);
    res.json({ status: 'processed', job_id: jobId });
  });
  return serve(app, ran);
}

/** Answers 200 to anything and runs it: no verification at all. */
export async function noVerificationReceiver(): Promise<TestReceiver> {
  const ran: string[] = [];
  const app = express();
  app.post('/hook', express.json({ limit: '25mb' }), (req, res) => {
    const jobId = (req.body as { job_id: string }).job_id;
    if (!ran.includes(jobId)) ran.push(jobId);
    res.json({ ok: true });
  });
  return serve(app, ran);
}

/** Verifies, answers 200, and never runs anything (a handler that drops what it gets). */
export async function neverRunsReceiver(): Promise<TestReceiver> {
  const verifier = createVerifier({ publicKey: PUBLIC_KEY });
  const app = express();
  app.post('/hook', express.raw({ type: () => true, limit: '25mb' }), (req, res) => {
    try {
      verifier.verify(req.body as Buffer, req.headers);
    } catch {
      return void res.status(401).end();
    }
    res.status(202).end();
  });
  return serve(app, []);
}

/** Answers 200 at once, then verifies and runs what verifies: a failure after the 200 is never retried. */
export async function answersFirstReceiver(): Promise<TestReceiver> {
  const ran: string[] = [];
  const verifier = createVerifier({ publicKey: PUBLIC_KEY });
  const app = express();
  app.post('/hook', express.raw({ type: () => true, limit: '25mb' }), (req, res) => {
    res.json({ received: true });
    try {
      const { jobId } = verifier.verify(req.body as Buffer, req.headers);
      if (!ran.includes(jobId)) ran.push(jobId);
    } catch {
      // refused after the answer: the sender never knows
    }
  });
  return serve(app, ran);
}

/** Verifies the bytes as they came, never decoding Content-Encoding (read from the request itself, no body parser). */
export async function noDecodingReceiver(): Promise<TestReceiver> {
  const ran: string[] = [];
  const verifier = createVerifier({ publicKey: PUBLIC_KEY });
  const app = express();
  app.post('/hook', async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let jobId: string;
    try {
      jobId = verifier.verify(Buffer.concat(chunks), req.headers).jobId;
    } catch {
      return void res.status(401).json({ error: { code: 'SIGNATURE_INVALID' } });
    }
    if (!ran.includes(jobId)) ran.push(jobId);
    res.json({ status: 'processed' });
  });
  return serve(app, ran);
}

/** Runs what verifies; hangs up, without an answer, on what does not. */
export async function hangsUpOnRefusalsReceiver(): Promise<TestReceiver> {
  const ran: string[] = [];
  const receiver = createReceiver({
    publicKey: PUBLIC_KEY,
    onEvent: (_e, { jobId }) => void ran.push(jobId),
  });
  const app = express();
  app.post('/hook', (req, res, next) => {
    // What jobhook would refuse (401) is cut instead of answered.
    const end = res.end.bind(res);
    res.end = ((...args: Parameters<typeof res.end>) =>
      res.statusCode === 401 ? (req.socket.destroy(), res) : end(...args)) as typeof res.end;
    receiver(req, res, next);
  });
  return serve(app, ran, () => receiver.close());
}

/** jobhook's receiver whose handler throws on failed jobs: those are answered 500 on every attempt. */
export async function failsFailedJobsReceiver(): Promise<TestReceiver> {
  const ran: string[] = [];
  const receiver = createReceiver({
    publicKey: PUBLIC_KEY,
    onEvent: async (event, { jobId }) => {
      if (event.status === 'fail') throw new Error('cannot store a failed job');
      ran.push(jobId);
    },
  });
  const app = express();
  app.post('/hook', receiver);
  return serve(app, ran, () => receiver.close());
}

/** Answers every request `status` with the error `code` (503 STORE_UNAVAILABLE: a receiver whose store is down), recording their headers. */
export async function answering(
  status: number,
  code: string,
): Promise<TestReceiver & { hits: Array<Record<string, unknown>> }> {
  const hits: Array<Record<string, unknown>> = [];
  const server = await listen((req: IncomingMessage, res: ServerResponse) => {
    hits.push({ ...req.headers });
    req.resume().on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ error: { code, message: 'refused' } }));
    });
  });
  return {
    url: `${server.url}/hook`,
    effectsUrl: `${server.url}/effects`,
    ran: [],
    close: server.close,
    hits,
  };
}
