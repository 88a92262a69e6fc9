import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { createReceiver } from 'jobhook/web';
import { markFailed, saveResult } from './results.js';

const receive = createReceiver({
  publicKey: process.env.GATEWAY_PUBLIC_KEY!,
  onEvent: async (event, { jobId }) => {
    if (event.status === 'success') await saveResult(jobId, event.output);
    else await markFailed(jobId, event.error.message);
  },
});
const app = new Hono();
app.post('/webhooks/gateway', (c) => receive(c.req.raw)); // the Fetch Request, its body unread
serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000) });
