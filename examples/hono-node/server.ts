import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { createReceiver } from 'jobhook/web';
import { markFailed, saveResult } from './results.js';
import { store } from './store.js';

const receive = createReceiver({
  publicKey: process.env.GATEWAY_PUBLIC_KEY!,
  store, // Redis or PostgreSQL (./store.ts); undefined: memory, one process
  closeStores: true, // receive.close() closes it too
  onEvent: async (event, { jobId }) => {
    if (event.status === 'success') await saveResult(jobId, event.output);
    else await markFailed(jobId, event.error.message);
  },
});
const app = new Hono();
app.post('/webhooks/gateway', (c) => receive(c.req.raw)); // the Fetch Request, its body unread
const server = serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000) });
// On SIGTERM: stop taking requests, finish the store operations still waiting, close the store; the process exits.
process.on('SIGTERM', () => server.close(() => void receive.close()));
