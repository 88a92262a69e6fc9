// Issue 30, retaken for issue 39: jobhook's own work per request, over the floor, on each
// framework, in steady state. Every contender is a server in a child process that receives
// the same distinct, freshly signed 1.4 KB deliveries (none is a duplicate: each server
// sees each job once), sent by a client in another process at 32 in flight over keep-alive
// connections. The server's CPU time over the measured run (process.cpuUsage, all threads)
// divided by N is its cost per request. The floor of a framework is its bare endpoint that
// reads the raw body and does what any verifier must: the SHA-256 of the body, one RSA
// verification with an imported key, JSON.parse, a JSON answer. Contenders run in
// interleaved rounds; reported: median and spread of µs per request, req/s, and
// contender − floor per round (and, on Express, × the HMAC peers' CPU, round by round).
//
// Warm-up (steady state, not the JIT's first minutes): every contender's server is started
// first and sent WARMUP (default 4,000) deliveries of their own (distinct job ids, never
// measured) at the same 32 in flight; the servers then stay up, and each round sends each
// one N more distinct deliveries, counting its CPU over them only. A server started fresh
// and measured at once spends most of its first thousands of requests in the interpreter
// and the optimizing compiler (issue 39: +250 to +330 µs over the floor unwarmed against
// +76 to +85 warmed on node:http, the same build).
//
// Contenders besides jobhook and the floor, on Express (the same body reading and the same
// kind of answer as the floor): svix's and standardwebhooks' receivers (HMAC-SHA256 over
// id.timestamp.body, then their JSON.parse, a Map of job ids for duplicates; the HMAC
// headers are signed by the client as it sends, their timestamps being checked within 5
// minutes), and a hand-written RSA receiver with a KeyObject imported once (the floor's
// hash and verification, plus what a receiver does besides: the algorithm header checked,
// the event's job_id and finished_at checked, a Map of job ids, the answer).
//   npm run build && node bench/http.mjs [requests per run, default 2000] [rounds, default 5]
//   (ONLY=express,fastify for some frameworks; KINDS=floor,jobhook for some contenders;
//   WARMUP=4000 deliveries before each measured run; SERVER_FLAGS=--cpu-prof to profile the servers;
//   BASE=/path/to/other/dist to run each jobhook contender from that build too, "… @base")
import { fork } from 'node:child_process';
import {
  createHash,
  createHmac,
  createPrivateKey,
  createPublicKey,
  sign as rsaSign,
  verify as rsaVerify,
} from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest, Agent } from 'node:http';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ocrBody } from './bodies.mjs';
import { load, machine, median, spread, table } from './harness.mjs';

const keys = new URL('../fixtures/keys/', import.meta.url);
const publicPem = readFileSync(new URL('test-2048-public.pem', keys), 'utf8');
const privatePem = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY
const N = Number(process.argv[2] ?? 2000);
const ROUNDS = Number(process.argv[3] ?? 5);
const CONCURRENCY = 32;
const WARMUP = Number(process.env.WARMUP ?? 4000);
/** The HMAC peers' secret (standardwebhooks' and svix's format: whsec_ and base64). */
const HMAC_SECRET = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;

/**
 * The floor's work on a raw body: hash, one RSA verification, parse (what every verifier
 * does at least). Its signature covers the SHA-256 hex of the raw body (x-floor-signature),
 * so that it verifies without canonical work.
 */
function floorWork(key) {
  return (body, signature) => {
    const digest = createHash('sha256').update(body).digest('hex');
    const ok = rsaVerify('sha256', Buffer.from(digest), key, Buffer.from(signature ?? '', 'hex'));
    const event = JSON.parse(body);
    return ok
      ? { status: 200, body: JSON.stringify({ status: 'processed', job_id: event.job_id }) }
      : { status: 401, body: '{"error":{"code":"SIGNATURE_INVALID"}}' };
  };
}

/**
 * The build a server loads: ../dist, or with BASE=<another checkout's dist> the jobhook
 * contenders run twice, the second time (named "… @base") from that build, in the same rounds.
 */
const BASE = process.env.BASE;
let serverDist = new URL('../dist/', import.meta.url).href;
const dist = (file) => new URL(file, serverDist).href;

/** The servers: [framework, kind] → a function starting one on a free port. */
const SERVERS = {
  'node:http': {
    async floor() {
      const work = floorWork(createPublicKey(publicPem));
      return createServer((req, res) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
          const a = work(Buffer.concat(chunks), req.headers['x-floor-signature']);
          res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body);
        });
      });
    },
    async jobhook() {
      const { createReceiver } = await import(dist('index.js'));
      const receive = createReceiver({ publicKey: publicPem, onEvent: () => undefined, log: false });
      return createServer((req, res) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', async () => {
          const a = await receive({ body: Buffer.concat(chunks), headers: req.headers });
          res.writeHead(a.status, a.headers).end(a.body);
        });
      });
    },
    async 'jobhook/express on node:http'() {
      const { createReceiver } = await import(dist('express.js'));
      return createServer(createReceiver({ publicKey: publicPem, onEvent: () => undefined, log: false }));
    },
  },
  express: {
    async floor() {
      const express = (await import('express')).default;
      const work = floorWork(createPublicKey(publicPem));
      const app = express();
      app.post('/hook', express.raw({ type: '*/*', limit: '25mb' }), (req, res) => {
        const a = work(req.body, req.headers['x-floor-signature']);
        res.status(a.status).type('application/json').send(a.body);
      });
      return createServer(app);
    },
    async jobhook() {
      const express = (await import('express')).default;
      const { createReceiver } = await import(dist('express.js'));
      const app = express();
      app.post('/hook', createReceiver({ publicKey: publicPem, onEvent: () => undefined, log: false }));
      return createServer(app);
    },
    async 'jobhook middleware'() {
      const express = (await import('express')).default;
      const { createMiddleware } = await import(dist('express.js'));
      const app = express();
      app.post('/hook', createMiddleware({ publicKey: publicPem, log: false }), (req, res) =>
        res.json({ status: 'processed', job_id: req.webhook.jobId }),
      );
      return createServer(app);
    },
    async svix() {
      const { Webhook } = await import('svix');
      const wh = new Webhook(HMAC_SECRET);
      return expressPeer((body, headers) => wh.verify(body, headers));
    },
    async standardwebhooks() {
      const { Webhook } = await import('standardwebhooks');
      const wh = new Webhook(HMAC_SECRET);
      return expressPeer((body, headers) => wh.verify(body, headers));
    },
    async 'hand-written RSA (KeyObject)'() {
      const key = createPublicKey(publicPem);
      return expressPeer((body, headers) => {
        if (headers['x-service-hash-algorithm'] !== 'SHA256') throw new Error('algorithm');
        const signature = headers['x-floor-signature'];
        if (typeof signature !== 'string' || !/^[0-9a-f]+$/.test(signature)) throw new Error('signature');
        const digest = createHash('sha256').update(body).digest('hex');
        if (!rsaVerify('sha256', Buffer.from(digest), key, Buffer.from(signature, 'hex')))
          throw new Error('signature');
        const event = JSON.parse(body);
        if (typeof event.job_id !== 'string' || Number.isNaN(Date.parse(event.finished_at)))
          throw new Error('payload');
        if (Date.now() - Date.parse(event.finished_at) > 86_400_000) throw new Error('too old');
        return event;
      });
    },
  },
  fastify: {
    async floor() {
      const work = floorWork(createPublicKey(publicPem));
      return fastifyServer((req, reply) => {
        const a = work(req.body, req.headers['x-floor-signature']);
        return reply.code(a.status).type('application/json').send(a.body);
      });
    },
    async jobhook() {
      const { createReceiver } = await import(dist('index.js'));
      const receive = createReceiver({ publicKey: publicPem, onEvent: () => undefined, log: false });
      return fastifyServer(async (req, reply) => {
        const a = await receive({ body: req.body, headers: req.headers });
        return reply.code(a.status).headers(a.headers).send(a.body);
      });
    },
  },
  'hono (node-server)': {
    async floor() {
      const work = floorWork(createPublicKey(publicPem));
      return honoServer(async (c) => {
        const a = work(Buffer.from(await c.req.arrayBuffer()), c.req.header('x-floor-signature'));
        return c.body(a.body, a.status, { 'content-type': 'application/json' });
      });
    },
    async jobhook() {
      const { createReceiver } = await import(dist('web.js'));
      const receive = createReceiver({ publicKey: publicPem, onEvent: () => undefined, log: false });
      return honoServer((c) => receive(c.req.raw));
    },
  },
};

/**
 * A peer's receiver on Express, as its documentation mounts it: the raw body (express.raw),
 * `verify(body, headers)` giving the parsed event or throwing, a Map of job ids seen
 * (duplicates answered without running the work again), a JSON answer.
 */
async function expressPeer(verify) {
  const express = (await import('express')).default;
  const seen = new Map();
  const app = express();
  app.post('/hook', express.raw({ type: '*/*', limit: '25mb' }), (req, res) => {
    let event;
    try {
      event = verify(req.body, req.headers);
    } catch {
      return res.status(401).type('application/json').send('{"error":{"code":"SIGNATURE_INVALID"}}');
    }
    const status = seen.has(event.job_id) ? 'duplicate' : 'processed';
    seen.set(event.job_id, true);
    res
      .status(200)
      .type('application/json')
      .send(JSON.stringify({ status, job_id: event.job_id }));
  });
  return createServer(app);
}

async function fastifyServer(handler) {
  const Fastify = (await import('fastify')).default;
  const app = Fastify({ bodyLimit: 25 * 1024 * 1024 });
  // The raw bytes (the README recipe): Fastify's own JSON parser out.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.post('/hook', handler);
  await app.ready();
  return app.server;
}

async function honoServer(handler) {
  const { Hono } = await import('hono');
  const { createAdaptorServer } = await import('@hono/node-server');
  const app = new Hono();
  app.post('/hook', handler);
  return createAdaptorServer({ fetch: app.fetch });
}

if (process.argv[2] === '--server') {
  const [, , , framework, named] = process.argv;
  const kind = named.replace(/ @base$/, '');
  if (kind !== named) serverDist = pathToFileURL(`${BASE.replace(/\/$/, '')}/`).href;
  const server = await SERVERS[framework][kind]();
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
  let cpu;
  let wall;
  process.on('message', (m) => {
    if (m === 'start') {
      cpu = process.cpuUsage();
      wall = performance.now();
      process.send('started');
    } else if (m === 'stop') {
      const used = process.cpuUsage(cpu);
      process.send({ cpuMs: (used.user + used.system) / 1000, wallMs: performance.now() - wall });
    } else if (m === 'exit') process.exit(0);
  });
} else if (process.argv[2] === '--client') {
  // Sends the deliveries of a file, CONCURRENCY at a time, over keep-alive connections.
  const [, , , port, file] = process.argv;
  const deliveries = JSON.parse(readFileSync(file, 'utf8'));
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const secret = Buffer.from(HMAC_SECRET.slice('whsec_'.length), 'base64');
  let sent = 0;
  const post = (d) =>
    new Promise((resolve) => {
      const body = Buffer.from(d.body);
      // The HMAC peers' headers (svix and standardwebhooks sign alike), signed as sent: their
      // timestamps must be within 5 minutes of the server's clock.
      const id = `msg_${process.pid}_${sent++}`;
      const timestamp = String(Math.floor(Date.now() / 1000));
      const hmac = `v1,${createHmac('sha256', secret).update(`${id}.${timestamp}.${d.body}`).digest('base64')}`;
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: Number(port),
          method: 'POST',
          path: '/hook',
          agent,
          headers: {
            ...d.headers,
            'content-length': body.length,
            'webhook-id': id,
            'webhook-timestamp': timestamp,
            'webhook-signature': hmac,
            'svix-id': id,
            'svix-timestamp': timestamp,
            'svix-signature': hmac,
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        },
      );
      req.on('error', () => resolve('error'));
      req.end(body);
    });
  // Warm-up deliveries first (their own job ids, as many as WARMUP, at the same 32 in
  // flight), then the measured ones once the server started counting.
  const send = async (list, counts) => {
    let next = 0;
    const lane = async () => {
      while (next < list.length) {
        const status = await post(list[next++]);
        counts[status] = (counts[status] ?? 0) + 1;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  };
  const warmCounts = {};
  await send(deliveries.slice(0, WARMUP), warmCounts);
  process.send({ warm: warmCounts });
  // Then a round's slice ({ from, to }) on each message, until 'exit'.
  process.on('message', async (m) => {
    if (m === 'exit') process.exit(0);
    const counts = {};
    await send(deliveries.slice(m.from, m.to), counts);
    process.send({ counts });
  });
} else {
  const { writeFileSync, mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  // WARMUP + ROUNDS × N distinct deliveries, signed as the gateway signs (canonical JSON: the bench body is
  // written canonically already, so a plain signature over it is the gateway's), finished now.
  const key = createPrivateKey(privatePem);
  const { canonicalize } = await import('../dist/index.js');
  const template = ocrBody(1400).replace(
    '2026-11-21T10:00:05Z',
    new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  );
  const deliveries = [];
  for (let k = 0; k < WARMUP + ROUNDS * N; k++) {
    const body = template.replace('3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41', `http-bench-${process.pid}-${k}`);
    const signature = rsaSign(
      'sha256',
      Buffer.from(createHash('sha256').update(canonicalize(body)).digest('hex')),
      key,
    ).toString('hex');
    const floor = rsaSign(
      'sha256',
      Buffer.from(createHash('sha256').update(body).digest('hex')),
      key,
    ).toString('hex');
    deliveries.push({
      body,
      headers: {
        'content-type': 'application/json',
        'x-service-signature': signature,
        'x-service-hash-algorithm': 'SHA256',
        'x-floor-signature': floor,
      },
    });
  }
  const file = join(mkdtempSync(join(tmpdir(), 'jobhook-http-bench-')), 'deliveries.json');
  writeFileSync(file, JSON.stringify(deliveries));
  const once = (child, predicate = () => true) =>
    new Promise((r) =>
      child.on('message', function on(m) {
        if (predicate(m)) {
          child.off('message', on);
          r(m);
        }
      }),
    );

  /** A contender's server and its client, the server warmed up (WARMUP deliveries) before any round. */
  async function start(framework, kind) {
    const server = fork(fileURLToPath(import.meta.url), ['--server', framework, kind], {
      stdio: 'inherit',
      execArgv: (process.env.SERVER_FLAGS ?? '').split(' ').filter(Boolean),
    });
    const { port } = await once(server);
    const client = fork(fileURLToPath(import.meta.url), ['--client', String(port), file], {
      stdio: 'inherit',
    });
    const { warm } = await once(client, (m) => m.warm !== undefined);
    if (Object.keys(warm).some((s) => s !== '200'))
      throw new Error(`${framework} ${kind}: warm-up answered ${JSON.stringify(warm)}`);
    return { server, client };
  }

  /** One measured run of a warmed contender: round `round`'s N deliveries, the server's CPU over them. */
  async function run({ server, client }, round) {
    server.send('start');
    await once(server, (m) => m === 'started');
    const t0 = performance.now();
    client.send({ from: WARMUP + round * N, to: WARMUP + (round + 1) * N });
    const { counts } = await once(client, (m) => m.counts !== undefined);
    const seconds = (performance.now() - t0) / 1000;
    server.send('stop');
    const { cpuMs } = await once(server, (m) => m.cpuMs !== undefined);
    return { cpuUs: (cpuMs * 1000) / N, rps: N / seconds, counts };
  }

  const frameworks = (process.env.ONLY?.split(',') ?? Object.keys(SERVERS)).filter(
    (f) => SERVERS[f] !== undefined,
  );
  const kinds = process.env.KINDS?.split(',');
  const contenders = frameworks.flatMap((f) =>
    Object.keys(SERVERS[f])
      .filter((k) => k === 'floor' || kinds === undefined || kinds.includes(k))
      .flatMap((k) =>
        BASE !== undefined && k.startsWith('jobhook')
          ? [
              [f, k],
              [f, `${k} @base`],
            ]
          : [[f, k]],
      ),
  );
  console.log(
    `# per-request work — ${machine()}\n\nStarted ${new Date().toISOString()}, load average ${load()}. ${N} distinct deliveries measured per run after ${WARMUP} of warm-up (1.4 KB), ${CONCURRENCY} in flight, ${ROUNDS} interleaved rounds.\n`,
  );
  const results = Object.fromEntries(contenders.map(([f, k]) => [`${f} ${k}`, []]));
  // Every server is started and warmed up first (one at a time), then stays up for the rounds.
  const started = {};
  for (const [f, k] of contenders) started[`${f} ${k}`] = await start(f, k);
  const loads = [];
  for (let round = 0; round < ROUNDS; round++) {
    loads.push(load().split(' ')[0]);
    for (const [f, k] of contenders) {
      const r = await run(started[`${f} ${k}`], round);
      results[`${f} ${k}`].push(r);
      console.error(
        `round ${round + 1}: ${f} ${k}: ${r.cpuUs.toFixed(1)} µs CPU/request, ${r.rps.toFixed(0)} req/s`,
      );
    }
  }
  // CPU per request × a peer's in the same round (the peers are on Express).
  const timesPeer = (r, f, peer) => {
    const p = results[`${f} ${peer}`];
    return p === undefined ? '' : median(r.map((x, i) => x.cpuUs / p[i].cpuUs)).toFixed(2);
  };
  for (const { server, client } of Object.values(started)) {
    client.send('exit');
    server.send('exit');
  }
  const rows = contenders.map(([f, k]) => {
    const r = results[`${f} ${k}`];
    const floor = results[`${f} floor`];
    const over = r.map((x, i) => x.cpuUs - floor[i].cpuUs);
    return {
      framework: f,
      contender: k,
      'CPU µs/request': `${median(r.map((x) => x.cpuUs)).toFixed(1)} (${spread(
        r.map((x) => x.cpuUs),
        1,
      )})`,
      'req/s': `${median(r.map((x) => x.rps)).toFixed(0)} (${spread(
        r.map((x) => x.rps),
        0,
      )})`,
      '− floor µs': k === 'floor' ? '' : `${median(over).toFixed(1)} (${spread(over, 1)})`,
      'req/s × floor': k === 'floor' ? '' : median(r.map((x, i) => x.rps / floor[i].rps)).toFixed(2),
      'CPU × svix': timesPeer(r, f, 'svix'),
      'CPU × standardwebhooks': timesPeer(r, f, 'standardwebhooks'),
      answers: Object.entries(
        r.reduce(
          (all, x) => (Object.entries(x.counts).forEach(([s, n]) => (all[s] = (all[s] ?? 0) + n)), all),
          {},
        ),
      )
        .map(([s, n]) => `${s}: ${n}`)
        .join(', '),
    };
  });
  console.log(table(rows));
  console.log(
    `\nFinished ${new Date().toISOString()}, load average ${load()}; 1-minute load at each round's start: ${loads.join(', ')}. Warm-up: ${WARMUP} deliveries per run before the measured ${N}.`,
  );
}
