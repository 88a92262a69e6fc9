import express from 'express';
import { createParserErrorHandler, createReceiver } from 'jobhook/express';
import { markFailed, saveResult } from './results.js';
import { store } from './store.js';

const receiver = createReceiver({
  publicKey: process.env.GATEWAY_PUBLIC_KEY!, // PEM (RSA PUBLIC KEY, PUBLIC KEY, CERTIFICATE), DER, JWK or KeyObject; an array during a rotation
  store, // Redis or PostgreSQL, shared by your instances (./store.ts); undefined: memory, one process
  closeStores: true, // receiver.close() closes it too
  onEvent: async (event, { jobId }) => {
    if (event.status === 'success') await saveResult(jobId, event.output);
    else await markFailed(jobId, event.error.message);
  },
});
const app = express();
app.post('/webhooks/gateway', receiver); // before express.json(): it reads the raw body itself
app.use(express.json()); // for your other routes
app.post('/api/orders', (req, res) => void res.json({ received: req.body }));
app.use(createParserErrorHandler()); // after the routes: a delivery a body parser refused is logged with the fix
const server = app.listen(Number(process.env.PORT ?? 3000));
// On SIGTERM: stop taking requests, finish the store operations still waiting, close the store; then the process exits.
process.on('SIGTERM', () => server.close(() => void receiver.close()));
