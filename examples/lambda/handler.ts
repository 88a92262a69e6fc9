// AWS Lambda behind API Gateway (REST API or HTTP API) or a function URL.
import { createReceiver } from 'jobhook';
import { RedisIdempotencyStore } from 'jobhook/redis';
import { markFailed, saveResult } from './results.js';

const receive = createReceiver({
  publicKey: process.env.GATEWAY_PUBLIC_KEY!,
  // Instances are frozen between invocations and run side by side: a shared store, not the memory one.
  store: new RedisIdempotencyStore({ url: process.env.REDIS_URL! }),
  onEvent: async (event, { jobId }) => {
    if (event.status === 'success') await saveResult(jobId, event.output);
    else await markFailed(jobId, event.error.message);
  },
});

/** The fields read here, the same in REST API (payload 1.0), HTTP API (2.0) and function URL events. */
interface HttpEvent {
  body?: string | null;
  isBase64Encoded?: boolean;
  headers?: Record<string, string | undefined> | null;
}

export const handler = async (event: HttpEvent) => {
  // Binary bodies (a gzip-encoded one, or any under a REST API's binary media types) arrive base64-encoded.
  const body = event.isBase64Encoded ? Buffer.from(event.body ?? '', 'base64') : (event.body ?? '');
  const answer = await receive({ body, headers: event.headers ?? {} });
  return { statusCode: answer.status, headers: answer.headers, body: answer.body };
};
