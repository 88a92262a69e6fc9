import { createServer, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GatewaySimulator } from '../../src/testing.js';

export interface Listening {
  url: string;
  port: number;
  close: () => Promise<void>;
}

/** Serves `handler` (a node:http listener or an Express app) on a free loopback port. */
export async function listen(handler: RequestListener): Promise<Listening> {
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export interface Hit {
  at: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver that answers each request with the next scripted status ('hang' never answers; the last one repeats). */
export async function scripted(
  answers: ReadonlyArray<number | 'hang'>,
): Promise<Listening & { hits: Hit[] }> {
  const hits: Hit[] = [];
  let k = 0;
  const server = await listen((req, res) => {
    const at = performance.now();
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      hits.push({ at, headers: req.headers, body });
      const a = answers[Math.min(k++, answers.length - 1)]!;
      if (a !== 'hang') res.writeHead(a, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return { ...server, hits };
}

export interface ApiAnswer {
  status: number;
  text: string;
  /** The JSON body (empty when it is not JSON); assert on it with toMatchObject. */
  json: Record<string, unknown>;
}

async function answer(res: Response): Promise<ApiAnswer> {
  const text = await res.text();
  let json: ApiAnswer['json'] = {};
  try {
    json = JSON.parse(text) as ApiAnswer['json'];
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, text, json };
}

/** POSTs a job request (an object, or a raw JSON string to keep floats such as 1.0). */
export async function createJob(
  sim: GatewaySimulator,
  request: object | string,
  token: string | null = sim.token,
): Promise<ApiAnswer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  return answer(
    await fetch(sim.jobsUrl, {
      method: 'POST',
      headers,
      body: typeof request === 'string' ? request : JSON.stringify(request),
    }),
  );
}

export async function getJob(
  sim: GatewaySimulator,
  id: string,
  token: string | null = sim.token,
): Promise<ApiAnswer> {
  return answer(
    await fetch(`${sim.jobsUrl}/${encodeURIComponent(id)}`, {
      headers: token === null ? {} : { authorization: `Bearer ${token}` },
    }),
  );
}

/** Polls the job until it is no longer `processing`. */
export async function pollUntilDone(sim: GatewaySimulator, id: string, everyMs = 10): Promise<ApiAnswer> {
  for (;;) {
    const r = await getJob(sim, id);
    if (r.json.status !== 'processing') return r;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
