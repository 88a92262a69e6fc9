import Fastify from 'fastify';
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
const app = Fastify();
// The webhook route in a plugin of its own: its parser keeps the raw bytes and takes bodies
// up to the receiver's maxBodyBytes (25 MiB), for this route only. Other routes parse JSON as usual.
app.register(async (webhooks) => {
  webhooks.removeAllContentTypeParsers();
  webhooks.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 25 * 1024 * 1024 }, (_req, body, done) =>
    done(null, body),
  );
  webhooks.post('/webhooks/gateway', async (req, reply) => {
    const answer = await receive({ body: req.body as Buffer, headers: req.headers });
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  });
});
app.post('/api/orders', async (req) => ({ received: req.body }));
app.addHook('onClose', () => receive.close());
await app.listen({ port: Number(process.env.PORT ?? 3000) });
// On SIGTERM: stop taking requests, then the onClose hook closes the receiver and its store; the process exits.
process.on('SIGTERM', () => void app.close());
