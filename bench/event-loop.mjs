// Goal 4 (issue 13): while a receiver verifies a 25 MB OCR-like delivery, a 1 KB
// delivery sent alongside is answered within 100 ms and monitorEventLoopDelay's max
// stays ≤ 50 ms. The receiver runs in a child process (Express createReceiver, or the
// agnostic createReceiver behind node:http), with large bodies on worker threads
// (default) or not (workerThresholdBytes: false); the parent sends the deliveries.
//   node bench/event-loop.mjs   (after npm run build)
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { ocrBody } from './bodies.mjs';
import { bufferingHandler, load, machine, median, table } from './harness.mjs';

const keys = new URL('../fixtures/keys/', import.meta.url);
const publicKey = readFileSync(new URL('test-2048-public.pem', keys), 'utf8');

if (process.argv[2] === '--send') {
  // Another client: sends one delivery (headers and body from the parent) and reports.
  process.once('message', async ({ url, headers, body }) => {
    const t0 = performance.now();
    const res = await fetch(url, { method: 'POST', headers, body });
    process.send({ status: res.status, text: await res.text(), ms: performance.now() - t0 });
    process.exit(0);
  });
} else if (process.argv[2] === '--receiver') {
  // Child: one receiver, reporting the event-loop delay it saw on request.
  const [, , , kind, offload] = process.argv;
  const options = {
    publicKey,
    onEvent: () => undefined,
    log: {},
    ...(offload === 'off' ? { workerThresholdBytes: false } : {}),
  };
  let handler;
  if (kind === 'express') {
    const express = (await import('express')).default;
    const { createReceiver } = await import('../dist/express.js');
    const app = express();
    app.post('/hook', createReceiver(options));
    handler = app;
  } else {
    const { createReceiver } = await import('../dist/index.js');
    const receive = createReceiver(options);
    handler = bufferingHandler(receive);
  }
  const server = createServer(handler).listen(0, '127.0.0.1', () =>
    process.send({ port: server.address().port }),
  );
  const h = monitorEventLoopDelay({ resolution: 1 });
  process.on('message', (m) => {
    if (m === 'start') {
      h.reset();
      h.enable();
    } else if (m === 'stop') {
      h.disable();
      process.send({ maxMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6 });
    } else if (m === 'exit') process.exit(0);
  });
} else {
  const { signDelivery } = await import('../dist/index.js');
  const privateKey = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY
  const stamp = () => new Date().toISOString();
  const bigText = ocrBody(25 * 1000 * 1000).replace('2026-11-21T10:00:05Z', stamp());
  let n = 0;
  const small = () =>
    signDelivery(
      `{"event":"async_job_completed","job_id":"small-${n++}-${process.pid}","status":"success","finished_at":"${stamp()}","output":{"text":"ok","confidence":1.0}}`,
      privateKey,
    );

  async function run(kind, offload, round) {
    const child = fork(fileURLToPath(import.meta.url), ['--receiver', kind, offload], { stdio: 'inherit' });
    const { port } = await new Promise((r) => child.once('message', r));
    const url = `http://127.0.0.1:${port}/hook`;
    // Warm up: a few small deliveries and one large one (JIT, WebAssembly, worker start).
    for (let k = 0; k < 20; k++) await post(url, small());
    const big = signDelivery(
      bigText.replace('3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41', `big-${round}-${kind}-${offload}-warm`),
      privateKey,
    );
    await post(url, big);
    const measured = signDelivery(
      bigText.replace('3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41', `big-${round}-${kind}-${offload}`),
      privateKey,
    );
    // The large delivery comes from another process, as from another connection of the gateway.
    const sender = fork(fileURLToPath(import.meta.url), ['--send'], { stdio: 'inherit' });
    child.send('start');
    const bigDone = new Promise((r) => sender.once('message', r));
    sender.send({ url, headers: measured.headers, body: measured.body });
    // A small delivery every 20 ms while the large one is being received and verified.
    const latencies = [];
    let finished = false;
    bigDone.then(() => (finished = true));
    while (!finished) {
      const s0 = performance.now();
      const r = await post(url, small());
      if (r.status !== 200) throw new Error(`small delivery got ${r.status}`);
      latencies.push(performance.now() - s0);
      await new Promise((r) => setTimeout(r, 20));
    }
    const bigResult = await bigDone;
    if (bigResult.status !== 200) throw new Error(`large delivery got ${bigResult.status} ${bigResult.text}`);
    child.send('stop');
    const loop = await new Promise((r) => child.once('message', r));
    child.send('exit');
    return {
      bigMs: bigResult.ms,
      smallMax: Math.max(...latencies),
      smallMedian: median(latencies),
      smalls: latencies.length,
      ...loop,
    };
  }

  async function post(url, d) {
    const res = await fetch(url, { method: 'POST', headers: d.headers, body: d.body });
    return { status: res.status, text: await res.text() };
  }

  console.log(
    `# event loop under a 25 MB delivery — ${machine()}\n\nStarted ${new Date().toISOString()}, load average ${load()}. Body: ${Buffer.byteLength(bigText)} B OCR-like.\n`,
  );
  const configs = [
    ['express', 'on'],
    ['express', 'off'],
    ['agnostic', 'on'],
    ['agnostic', 'off'],
  ];
  const results = Object.fromEntries(configs.map((c) => [c.join(' '), []]));
  // Interleaved rounds: every configuration once per round.
  for (let round = 0; round < 3; round++) {
    for (const [kind, offload] of configs)
      results[`${kind} ${offload}`].push(await run(kind, offload, round));
  }
  const rows = configs.map(([kind, offload]) => {
    const r = results[`${kind} ${offload}`];
    const m = (f) => median(r.map(f)).toFixed(1);
    const range = (f) => `${Math.min(...r.map(f)).toFixed(1)}–${Math.max(...r.map(f)).toFixed(1)}`;
    return {
      receiver: kind === 'express' ? 'jobhook/express createReceiver' : 'jobhook createReceiver + node:http',
      'large bodies on workers':
        offload === 'on' ? 'yes (default ≥ 1 MiB)' : 'no (workerThresholdBytes: false)',
      '25 MB delivery ms': `${m((x) => x.bigMs)} (${range((x) => x.bigMs)})`,
      '1 KB alongside, max ms': `${m((x) => x.smallMax)} (${range((x) => x.smallMax)})`,
      '1 KB alongside, median ms': m((x) => x.smallMedian),
      'event loop delay max ms': `${m((x) => x.maxMs)} (${range((x) => x.maxMs)})`,
      'small deliveries sent': m((x) => x.smalls),
    };
  });
  console.log(table(rows));
  console.log(
    `\nMedians of 3 interleaved rounds (range in brackets). Goal: 1 KB answered ≤ 100 ms, event-loop max ≤ 50 ms.\nFinished ${new Date().toISOString()}, load average ${load()}.`,
  );
}
