// Requests/s of a bare express.json() endpoint vs the jobhook receiver (memory store),
// loopback only, bounded in time. The server runs in a child process, autocannon here.
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { ocrBody } from './bodies.mjs';
import { machine, table } from './harness.mjs';

const DELIVERIES = 2000;
const keys = new URL('../fixtures/keys/', import.meta.url);

if (process.argv[2] === '--serve') {
  const express = (await import('express')).default;
  const app = express();
  if (process.argv[3] === 'bare') {
    app.post('/hook', express.json({ limit: '25mb' }), (req, res) =>
      res.json({ ok: true, job: req.body.job_id }),
    );
  } else {
    const { createReceiver } = await import('../dist/express.js');
    app.post(
      '/hook',
      createReceiver({
        publicKey: readFileSync(new URL('test-2048-public.pem', keys), 'utf8'),
        onEvent: () => undefined,
        log: {},
      }),
    );
  }
  const server = app.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
  process.on('message', () => server.close(() => process.exit(0)));
} else {
  const { signDelivery } = await import('../dist/index.js');
  const privateKey = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY
  // Finished just now: inside the receiver's 24 h replay window.
  const template = ocrBody(1400).replace('2026-11-21T10:00:05Z', new Date().toISOString());
  const requests = Array.from({ length: DELIVERIES }, (_, k) => {
    const d = signDelivery(
      template.replace('3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41', `bench-${k}`),
      privateKey,
    );
    return { method: 'POST', path: '/hook', headers: d.headers, body: d.body };
  });

  async function run(kind, seconds) {
    const child = fork(new URL(import.meta.url), ['--serve', kind], { stdio: 'inherit' });
    const { port } = await new Promise((r) => child.once('message', r));
    let next = 0;
    const result = await autocannon({
      url: `http://127.0.0.1:${port}`,
      connections: 10,
      duration: seconds,
      requests: [{ setupRequest: (req) => ({ ...req, ...requests[next++ % DELIVERIES] }) }],
    });
    child.send('stop');
    await new Promise((r) => child.once('exit', r));
    return result;
  }

  console.log(`# express — ${machine()}\n`);
  await run('bare', 2); // warm-up of the machine and the client
  const rounds = { bare: [], jobhook: [] };
  const rows = [];
  for (let round = 1; round <= 3; round++) {
    for (const kind of ['bare', 'jobhook']) {
      const r = await run(kind, 6);
      rounds[kind].push(r.requests.average);
      rows.push({
        round,
        endpoint: kind === 'bare' ? 'bare express.json()' : 'jobhook createReceiver (memory store)',
        'req/s': r.requests.average.toFixed(0),
        'p50 ms': r.latency.p50,
        'p99 ms': r.latency.p99,
        non2xx: r.non2xx,
        errors: r.errors,
      });
    }
  }
  const median = (a) => [...a].sort((x, y) => x - y)[1];
  console.log(table(rows, Object.keys(rows[0])));
  console.log(
    `\nmedian req/s: bare ${median(rounds.bare).toFixed(0)}, jobhook ${median(rounds.jobhook).toFixed(0)}, ratio ${(median(rounds.jobhook) / median(rounds.bare)).toFixed(2)}`,
  );
}
