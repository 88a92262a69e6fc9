// jobhook demo: an Express receiver with the SQLite idempotency store (a file in a
// temporary directory: durable, the store for one machine; on Node 20, which has no
// node:sqlite, the in-memory store), and three deliveries signed with the TEST-ONLY key
// in fixtures/keys (never use it elsewhere). The second delivery goes to a receiver
// started again on the same file, as after a restart: it finds the job done.
// Run with `npm run demo` (it builds the JavaScript first, a few seconds). The imports
// name the package itself, as your code would; inside this repository they resolve to dist/.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { MemoryIdempotencyStore } from 'jobhook';
import { createReceiver } from 'jobhook/express';
import { SqliteIdempotencyStore } from 'jobhook/sqlite';
import { signPayload } from 'jobhook/testing';

const keys = new URL('../fixtures/keys/', import.meta.url);
const publicKey = readFileSync(new URL('test-2048-public-pkcs1.pem', keys), 'utf8'); // BEGIN RSA PUBLIC KEY, as gateways publish it
const privateKey = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY

const sqlite = await import('node:sqlite').then(
  () => true,
  () => false,
);
const dir = mkdtempSync(join(tmpdir(), 'jobhook-demo-'));
const path = join(dir, 'jobhook.db');
if (!sqlite) console.log(`(Node ${process.version} has no node:sqlite: the demo uses the memory store)`);

const handled = [];
/** A receiver (its own store on the file: a process started again) listening on a free port. */
async function start() {
  const store = sqlite ? new SqliteIdempotencyStore({ path, migrate: true }) : memory;
  const app = express();
  app.post(
    '/webhooks/gateway',
    createReceiver({
      publicKey,
      store,
      onEvent: (event, { jobId, dialect }) => {
        handled.push(jobId);
        console.log(
          `   handler: job ${jobId} ${event.status} (${event.feature}, canonical dialect ${dialect})`,
        );
      },
    }),
  );
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const stop = async () => {
    server.close();
    if (sqlite) await store.close();
  };
  return { url: `http://127.0.0.1:${server.address().port}/webhooks/gateway`, stop };
}
const memory = sqlite ? undefined : new MemoryIdempotencyStore();

let receiver = await start();
console.log(
  `jobhook demo: Express receiver with the ${sqlite ? `SQLite store (${path})` : 'memory store'} on ${receiver.url}`,
);

// What the gateway would send: floats such as 1.0 and 0.0 that JSON.parse would lose,
// for a job that finished a moment ago (older events are refused as replays).
const finished = new Date(Date.now() - 5_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const body =
  '{"event":"async_job_completed","job_id":"3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41","status":"success",' +
  `"feature":"ocr","subfeature":"ocr","provider":"acme","model":null,"created_at":"${finished}",` +
  `"finished_at":"${finished}","output":{"text":"Grüße aus Zürich","confidence":1.0,"box":{"x":0.0,"y":0.5}}}`;
const delivery = signPayload(body, privateKey);

async function send(label, payload, headers) {
  const res = await fetch(receiver.url, { method: 'POST', headers, body: payload });
  const answer = await res.json();
  const what = answer.status ?? answer.error.code;
  console.log(`${label.padEnd(28)} → ${res.status} ${what}`);
  return { status: res.status, what };
}

let ok = true;
try {
  const a = await send('1. signed delivery', delivery.body, delivery.headers);
  if (sqlite) {
    // A restart: the store opened again on the file remembers the job.
    await receiver.stop();
    receiver = await start();
    console.log('   (receiver restarted on the same file)');
  }
  const b = await send('2. the same delivery again', delivery.body, delivery.headers);
  const c = await send('3. tampered delivery', delivery.body.replace('Zürich', 'Zurich'), delivery.headers);
  ok =
    a.status === 200 &&
    a.what === 'processed' &&
    b.status === 200 &&
    b.what === 'duplicate' &&
    c.status === 401 &&
    handled.length === 1;
  console.log(ok ? 'processed once, duplicate ignored, tampered rejected: OK' : 'UNEXPECTED RESULT');
} finally {
  await receiver.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exitCode = ok ? 0 : 1;
