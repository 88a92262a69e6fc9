// The Node entries of jobhook (createVerifier and createReceiver from 'jobhook', createReceiver
// from 'jobhook/express') on another runtime's node:http, for test/runtimes/matrix.test.ts.
// An entry whose construction throws is reported, not served: the test holds that it names jobhook/web.
import crypto from 'node:crypto';
import http from 'node:http';

const publicKey = process.env.GATEWAY_PUBLIC_KEY;
const onEvent = () => undefined;
const routes = new Map();
const refused = {};

async function entry(path, make) {
  try {
    routes.set(path, await make());
  } catch (err) {
    refused[path] = `${err?.name}: ${err?.message}`;
  }
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function send(res, status, headers, body) {
  res.writeHead(status, headers);
  res.end(body);
}

await entry('/verifier', async () => {
  const { createVerifier } = await import('jobhook');
  const verifier = createVerifier({ publicKey });
  return async (req, res) => {
    const body = await readBody(req);
    try {
      const { jobId } = verifier.verify(body, req.headers);
      send(
        res,
        200,
        { 'content-type': 'application/json' },
        JSON.stringify({ status: 'verified', job_id: jobId }),
      );
    } catch (err) {
      send(
        res,
        422,
        { 'content-type': 'application/json' },
        JSON.stringify({ error: { code: err.code, message: err.message } }),
      );
    }
  };
});

await entry('/receiver', async () => {
  const { createReceiver } = await import('jobhook');
  const receive = createReceiver({ publicKey, onEvent });
  return async (req, res) => {
    const answer = await receive({ body: await readBody(req), headers: req.headers });
    send(res, answer.status, answer.headers, answer.body);
  };
});

await entry('/express', async () => {
  const { default: express } = await import('express');
  const { createReceiver } = await import('jobhook/express');
  const app = express();
  app.post('/express', createReceiver({ publicKey, onEvent }));
  return app;
});

// What this runtime's node:crypto does with a raw RSA operation (the probe's first candidate).
let rawRsa = 'works';
try {
  crypto.publicDecrypt({ key: publicKey, padding: crypto.constants.RSA_NO_PADDING }, Buffer.alloc(256, 1));
} catch (err) {
  rawRsa = err.message;
}

const server = http.createServer((req, res) => {
  const route = routes.get(new URL(req.url, 'http://x').pathname);
  if (req.method !== 'POST' || route === undefined) return send(res, 404, {}, 'Not Found');
  Promise.resolve(route(req, res)).catch((err) => send(res, 500, {}, String(err)));
});
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  const { address, port } = server.address();
  console.log(`listening on http://${address}:${port}/ ${JSON.stringify({ refused, rawRsa })}`);
});
