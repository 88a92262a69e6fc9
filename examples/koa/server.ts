import Koa from 'koa';
import getRawBody from 'raw-body';
import { createReceiver } from 'jobhook';
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
const app = new Koa();
app.use(async (ctx, next) => {
  if (ctx.method !== 'POST' || ctx.path !== '/webhooks/gateway') return next();
  // The raw bytes, up to the receiver's maxBodyBytes (25 MiB); any way to read the request stream works.
  const body = await getRawBody(ctx.req, { limit: '25mb' });
  const answer = await receive({ body, headers: ctx.headers });
  ctx.status = answer.status;
  ctx.set(answer.headers);
  ctx.body = answer.body;
});
const server = app.listen(Number(process.env.PORT ?? 3000));
// On SIGTERM: stop taking requests, finish the store operations still waiting, close the store; the process exits.
process.on('SIGTERM', () => server.close(() => void receive.close()));
