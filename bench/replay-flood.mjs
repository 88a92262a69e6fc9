// Issues 19 and 25: a replayed genuine signature buys an attacker nothing. Against each
// adapter (a receiver in a child process, default options: maxInFlightBytes 64 MiB,
// workers on), for `SECONDS` per round, one attack (SCENARIO):
// - costly (default): 4 senders replay captured genuine signatures (one each, never
//   delivered to this receiver, so each must be verified) with 24 MB bodies of floats,
//   and 4 with small costly nested bodies (~190 kB, about 100 MB of canonical text over
//   the dialects);
// - malformed: 8 senders replay one captured signature with ~1 MB bodies (just under the
//   1 MiB worker threshold) that are JSON up to their last bytes;
// - slow: 131 connections under one captured signature each declare 512 kB and send one
//   byte a second (131 B/s in all), reopened when the receiver drops them;
// meanwhile a genuine 1.4 KB delivery every 100 ms.
// Reported: event-loop delay max in the receiver, the genuine deliveries' p50/p99/max and
// how many got a 503, attack answers by status, the receiver's peak RSS over its RSS
// after warm-up, and the slowest `receiver.health()` (where the adapter has it).
//   npm run build && node bench/replay-flood.mjs [seconds per round, default 20] [rounds, default 2]
//   (SCENARIO=costly|malformed|slow; ADAPTERS=express,fetch for some; RECEIVER_FLAGS=--cpu-prof to profile the receivers)
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { bufferingHandler, load, machine, median } from './harness.mjs';

const keys = new URL('../fixtures/keys/', import.meta.url);
const publicKey = readFileSync(new URL('test-2048-public.pem', keys), 'utf8');
const privateKey = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY
const SECONDS = Number(process.argv[2] ?? 20);
const ROUNDS = Number(process.argv[3] ?? 2);
const ADAPTERS = (process.env.ADAPTERS ?? 'express,middleware,fetch,agnostic').split(',');
const SCENARIO = process.env.SCENARIO ?? 'costly';
const stamp = () => new Date().toISOString();
const genuineText = (id) =>
  `{"event":"async_job_completed","job_id":"${id}","status":"success","feature":"ocr","subfeature":"ocr","provider":"acme","model":null,` +
  `"created_at":"2026-11-21T10:00:00Z","finished_at":"${stamp()}","output":{"text":"${'Grüße aus Zürich, '.repeat(60)}","confidence":1.0,"box":{"x":0.0,"y":0.5}}}`;

if (process.argv[2] === '--receiver') {
  const kind = process.argv[3];
  const options = { publicKey, log: {} };
  let handler;
  let controls;
  if (kind === 'express' || kind === 'middleware') {
    const express = (await import('express')).default;
    const { createReceiver, createMiddleware } = await import('../dist/express.js');
    const app = express();
    if (kind === 'express')
      app.post('/hook', (controls = createReceiver({ ...options, onEvent: () => undefined })));
    else
      app.post('/hook', createMiddleware(options), (req, res) =>
        res.json({ status: 'verified', job_id: req.webhook.jobId }),
      );
    handler = app;
  } else if (kind === 'fetch') {
    const { createReceiver } = await import('../dist/web.js');
    const receive = createReceiver({ ...options, onEvent: () => undefined });
    controls = receive;
    handler = async (req, res) => {
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
      let open = true;
      const body = new ReadableStream({
        start(c) {
          req.on('data', (chunk) => open && c.enqueue(new Uint8Array(chunk)));
          req.on('end', () => open && ((open = false), c.close()));
          req.on('error', (e) => open && ((open = false), c.error(e)));
        },
        cancel() {
          open = false;
          req.pause();
        },
      });
      const response = await receive(
        new Request('http://127.0.0.1/hook', { method: 'POST', headers, body, duplex: 'half' }),
      );
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(await response.text());
      if (!req.complete) res.once('finish', () => req.socket?.destroy());
    };
  } else {
    // The agnostic receiver behind node:http: the server reads the whole body first (as Fastify, Koa, Lambda do).
    const { createReceiver } = await import('../dist/index.js');
    const receive = createReceiver({ ...options, onEvent: () => undefined });
    controls = receive;
    handler = bufferingHandler(receive);
  }
  const server = createServer(handler).listen(0, '127.0.0.1', () =>
    process.send({ port: server.address().port }),
  );
  const h = monitorEventLoopDelay({ resolution: 1 });
  let base = 0;
  let peak = 0;
  const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  sample.unref();
  // How long a readiness probe due every 200 ms waits for receiver.health() (its own timeout: 1 s),
  // counted from when it was due: a blocked event loop delays the probe itself.
  let healthMax = 0;
  const probe = () => {
    const due = performance.now() + 200;
    setTimeout(async () => {
      if (controls !== undefined) {
        await controls.health(1000);
        healthMax = Math.max(healthMax, performance.now() - due);
      }
      probe();
    }, 200).unref();
  };
  probe();
  process.on('message', (m) => {
    if (m === 'start') {
      globalThis.gc?.();
      base = process.memoryUsage.rss();
      peak = base;
      healthMax = 0;
      h.reset();
      h.enable();
    } else if (m === 'stop') {
      h.disable();
      process.send({
        loopMaxMs: h.max / 1e6,
        loopP99Ms: h.percentile(99) / 1e6,
        rssBaseMiB: base / 2 ** 20,
        rssPeakMiB: peak / 2 ** 20,
        healthMaxMs: controls === undefined ? undefined : healthMax,
      });
    } else if (m === 'exit') process.exit(0);
  });
} else if (process.argv[2] === '--attack') {
  // The attackers: 4 float senders and 4 nested senders, each replaying a captured signature of its own.
  const { signDelivery } = await import('../dist/index.js');
  const [, , , port, seconds] = process.argv;
  const captured = (label) =>
    signDelivery(genuineText(`captured-${label}-${process.pid}`), privateKey).headers;
  const floats = [];
  for (let size = 0; size < 24_000_000; size += 14) floats.push(`${(size % 99991) / 7}e-9`.slice(0, 12));
  const floatBody = Buffer.from(
    `{"event":"async_job_completed","job_id":"x","status":"success","finished_at":"${stamp()}","output":{"values":[${floats.join(',')}]}}`,
  );
  floats.length = 0;
  const nest = (depth) => '['.repeat(depth) + '0.5e-7' + ']'.repeat(depth);
  const nestedBody = Buffer.from(
    `{"event":"async_job_completed","job_id":"x","status":"success","finished_at":"${stamp()}","output":{"deep":[${Array(230).fill(nest(400)).join(',')}]}}`,
  );
  const counts = {};
  const end = Date.now() + Number(seconds) * 1000;
  const quiet = new WeakSet();
  const send = (body, headers) =>
    new Promise((resolve) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: Number(port),
          method: 'POST',
          path: '/hook',
          headers: { ...headers, 'content-type': 'application/json', 'content-length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        },
      );
      req.on('error', () => resolve('error'));
      // A receiver may answer and reset before a 21 MB body is written: the socket's late write error is the attack's, not the bench's.
      req.on(
        'socket',
        (socket) => quiet.has(socket) || (quiet.add(socket), socket.on('error', () => undefined)),
      );
      req.end(body);
    });
  const sender = async (label, body, given) => {
    const headers = given ?? captured(label);
    while (Date.now() < end) {
      const status = await send(body, headers);
      const key = `${label.split('-')[0]} ${status}`;
      counts[key] = (counts[key] ?? 0) + 1;
      // An attacker that ignores Retry-After, with a short pause so the client itself is not the bottleneck.
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  // ~1 MB of floats, JSON up to its last bytes (the closing brackets are missing).
  const malformedBody = Buffer.from(
    `{"event":"async_job_completed","job_id":"x","status":"success","finished_at":"${stamp()}","output":{"values":[${Array.from({ length: 80_000 }, (_, k) => `${k}.${k % 997}5`).join(',')}`,
  );
  /** One connection declaring 512 kB and sending a byte a second, reopened when dropped, until the round ends. */
  const trickler = async (headers) => {
    while (Date.now() < end) {
      const status = await new Promise((resolve) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port: Number(port),
            method: 'POST',
            path: '/hook',
            headers: { ...headers, 'content-type': 'application/json', 'content-length': 512 * 1024 },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode));
          },
        );
        req.on('error', () => resolve('error'));
        req.flushHeaders();
        const tick = setInterval(
          () => (Date.now() < end ? req.write('[') : (clearInterval(tick), req.destroy(), resolve('ended'))),
          1000,
        );
        req.on('close', () => clearInterval(tick));
      });
      counts[`slow ${status}`] = (counts[`slow ${status}`] ?? 0) + 1;
    }
  };
  process.send({
    ready: true,
    floatBytes: floatBody.length,
    nestedBytes: nestedBody.length,
    malformedBytes: malformedBody.length,
  });
  await new Promise((r) => process.once('message', r));
  if (SCENARIO === 'costly')
    await Promise.all(
      [0, 1, 2, 3].flatMap((k) => [sender(`float-${k}`, floatBody), sender(`nested-${k}`, nestedBody)]),
    );
  else if (SCENARIO === 'malformed') {
    const one = captured('malformed');
    await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(() => sender('malformed', malformedBody, one)));
  } else await Promise.all(Array.from({ length: 131 }, () => trickler(captured('slow'))));
  process.send({ counts });
  process.exit(0);
} else {
  const { signDelivery } = await import('../dist/index.js');
  const post = (port, d) =>
    new Promise((resolve) => {
      const body = Buffer.from(d.body);
      const t0 = performance.now();
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/hook',
          headers: { ...d.headers, 'content-length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - t0 }));
        },
      );
      req.on('error', () => resolve({ status: 'error', ms: performance.now() - t0 }));
      req.end(body);
    });
  let n = 0;
  async function run(kind) {
    const child = fork(fileURLToPath(import.meta.url), ['--receiver', kind], {
      stdio: 'inherit',
      execArgv: ['--expose-gc', ...(process.env.RECEIVER_FLAGS ?? '').split(' ').filter(Boolean)],
    });
    const { port } = await new Promise((r) => child.once('message', r));
    // Warm up: genuine deliveries, one costly replay of each kind (JIT, WebAssembly, worker start).
    for (let k = 0; k < 20; k++) await post(port, signDelivery(genuineText(`warm-${n++}`), privateKey));
    const attack = fork(fileURLToPath(import.meta.url), ['--attack', String(port), String(SECONDS)], {
      stdio: 'inherit',
    });
    const sizes = await new Promise((r) => attack.once('message', r));
    const attackDone = new Promise((r) => attack.on('message', (m) => m.counts && r(m.counts)));
    child.send('start');
    attack.send('go');
    const genuine = [];
    const end = Date.now() + SECONDS * 1000;
    while (Date.now() < end) {
      const d = signDelivery(genuineText(`genuine-${process.pid}-${n++}`), privateKey);
      genuine.push(await post(port, d));
      await new Promise((r) => setTimeout(r, 100));
    }
    const counts = await attackDone;
    child.send('stop');
    const m = await new Promise((r) => child.once('message', r));
    child.send('exit');
    const ms = genuine.map((g) => g.ms).sort((a, b) => a - b);
    const pct = (p) => ms[Math.min(ms.length - 1, Math.floor((p / 100) * ms.length))];
    return {
      ...m,
      genuine: genuine.length,
      genuineOk: genuine.filter((g) => g.status === 200).length,
      genuine503: genuine.filter((g) => g.status === 503).length,
      p50: pct(50),
      p99: pct(99),
      max: ms[ms.length - 1],
      counts,
      sizes,
    };
  }
  console.log(
    `# replay flood (${SCENARIO}) — ${machine()}\n\nStarted ${stamp()}, load average ${load()}. ${SECONDS} s per adapter per round, ${ROUNDS} interleaved rounds.\n`,
  );
  const results = Object.fromEntries(ADAPTERS.map((a) => [a, []]));
  for (let round = 0; round < ROUNDS; round++) for (const a of ADAPTERS) results[a].push(await run(a));
  const f = (x) => x.toFixed(1);
  const range = (xs) => `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
  console.log(
    '| adapter | loop delay max ms | genuine p50 / p99 / max ms | genuine 200 / sent, 503 | attack answers (all rounds) | RSS peak − base MiB (base) | slowest health() ms |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const a of ADAPTERS) {
    const r = results[a];
    const counts = {};
    for (const x of r) for (const [k, v] of Object.entries(x.counts)) counts[k] = (counts[k] ?? 0) + v;
    console.log(
      `| ${a} | ${range(r.map((x) => x.loopMaxMs))} | ${r.map((x) => `${f(x.p50)} / ${f(x.p99)} / ${f(x.max)}`).join('; ')} | ${r.map((x) => `${x.genuineOk}/${x.genuine}, ${x.genuine503}`).join('; ')} | ${Object.entries(
        counts,
      )
        .sort()
        .map(([k, v]) => `${k}: ${v}`)
        .join(
          ', ',
        )} | ${r.map((x) => `${f(x.rssPeakMiB - x.rssBaseMiB)} (${f(x.rssBaseMiB)})`).join('; ')} | ${r.map((x) => (x.healthMaxMs === undefined ? '–' : f(x.healthMaxMs))).join('; ')} |`,
    );
  }
  const sizes = results.express[0].sizes;
  console.log(
    `\nBodies: floats ${sizes.floatBytes} B, nested ${sizes.nestedBytes} B, malformed ${sizes.malformedBytes} B. Per round, the figures of each round are listed in order (loop delay: median, range).\nFinished ${stamp()}, load average ${load()}.`,
  );
}
