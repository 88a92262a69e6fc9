/**
 * The Fetch receiver served on node:http the way Node adapters commonly do it (the
 * body as `Readable.toWeb(req)`, as @hono/node-server and hand-written servers do), in a
 * process of its own: a receiver that makes Node throw inside its stream adapter would
 * kill it. Sends forged deliveries with bodies, then a genuine one, each on a fresh
 * connection, then a forged one whose body never ends, and prints one JSON line: the
 * statuses seen, and whether the server ended the endless one's connection.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { createReceiver } from '../../src/web.js';
import { jobId, signed } from './deliveries.js';
import { publicPem } from './keys.js';

const handler = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log: {} });
const server = http.createServer((req, res) => {
  const request = new Request(`http://127.0.0.1${req.url}`, {
    method: req.method,
    headers: req.headers as Record<string, string>,
    body: Readable.toWeb(req) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  void handler(request).then(async (response) => {
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const { port } = server.address() as AddressInfo;

/** One request on its own connection: the status line's code, or 0 when the connection ended without one. */
function send(headers: Record<string, string>, body: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    socket.on('data', (d) => {
      got += d;
      if (got.includes('\r\n')) {
        resolve(Number(got.split(' ')[1]));
        socket.destroy();
      }
    });
    socket.on('error', () => resolve(0));
    socket.on('close', () => resolve(0));
    const head = Object.entries({
      host: '127.0.0.1',
      'content-type': 'application/json',
      'content-length': String(body.length),
      ...headers,
    })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST /hook HTTP/1.1\r\n${head}\r\n`);
    socket.write(body);
  });
}

const statuses: number[] = [];
for (const size of [300, 300, 300, 2_000, 64 * 1024, 512 * 1024]) {
  statuses.push(await send({ 'x-service-signature': 'ab'.repeat(256) }, Buffer.alloc(size, 0x20)));
  statuses.push(await send({}, Buffer.alloc(size, 0x20)));
}
const d = signed(jobId());
statuses.push(await send(d.headers, Buffer.from(d.body)));

/** A forged request whose chunked body never ends: does the server end the connection after its answer? */
function endless(): Promise<{ status: number; connection: string | undefined; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    socket.on('data', (d) => (got += d));
    socket.on('error', () => undefined);
    const result = (closedByServer: boolean) => {
      clearInterval(writer);
      clearTimeout(limit);
      socket.destroy();
      resolve({
        status: Number(got.split(' ')[1] ?? 0),
        connection: /\r\nconnection: *([^\r]*)/i.exec(got)?.[1]?.toLowerCase(),
        closedByServer,
      });
    };
    socket.on('close', () => result(true));
    const limit = setTimeout(() => result(false), 8000);
    socket.write(
      `POST /hook HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nx-service-signature: ${'ab'.repeat(256)}\r\n\r\n`,
    );
    const chunk = `4000\r\n${' '.repeat(0x4000)}\r\n`;
    const writer = setInterval(() => socket.write(chunk), 5);
  });
}
const streamed = await endless();
process.stdout.write(`${JSON.stringify({ statuses, streamed })}\n`);
server.closeAllConnections();
server.close();
