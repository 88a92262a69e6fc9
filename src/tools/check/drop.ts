/**
 * One attempt the sender gives up on once its body was sent, as the gateway does when
 * its 30 s timeout expires or the connection breaks: the receiver got the whole
 * delivery and may run it, the sender never reads the answer and will try again.
 * node:http rather than fetch, which cannot tell when the body has left.
 */
import { request as httpRequest, type ClientRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface DroppedAttempt {
  startedAt: number;
  elapsedMs: number;
  /** Set when the request failed before its body was sent (then it was not a drop). */
  error?: string;
}

/** Sends the request, closes the connection once the body is written, never reads an answer. */
export function sendAndDrop(
  url: URL,
  headers: Record<string, string>,
  body: string | Uint8Array,
  timeoutMs: number,
): Promise<DroppedAttempt> {
  const startedAt = Date.now();
  const t0 = performance.now();
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let settled = false;
    const done = (error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve({
        startedAt,
        elapsedMs: Math.round(performance.now() - t0),
        ...(error === undefined ? {} : { error }),
      });
    };
    const req: ClientRequest = request(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(bytes.byteLength) },
    });
    const timer = setTimeout(() => done(`not sent within ${timeoutMs} ms`), timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    req.on('response', (res) => {
      res.destroy(); // answered before the body left: the answer is ignored all the same
      done();
    });
    req.end(bytes, () => done());
  });
}
