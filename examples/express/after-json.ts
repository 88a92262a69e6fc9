import express from 'express';
import { createParserErrorHandler, createReceiver, keepRawBody } from 'jobhook/express';
import { markFailed, saveResult } from './results.js';
import { store } from './store.js';

const app = express();
// A JSON parser that runs first keeps the raw bytes for the signature, and takes
// bodies as large as the receiver does (body-parser's default is 100 kB; 413 ends the gateway's retries).
app.use(express.json({ verify: keepRawBody, limit: '25mb' }));
const receiver = createReceiver({
  publicKey: process.env.GATEWAY_PUBLIC_KEY!,
  store,
  closeStores: true,
  onEvent: async (event, { jobId }) => {
    if (event.status === 'success') await saveResult(jobId, event.output);
    else await markFailed(jobId, event.error.message);
  },
});
app.post('/webhooks/gateway', receiver);
app.post('/api/orders', (req, res) => void res.json({ received: req.body }));
// A delivery the parser still refuses (its limit lowered one day): one jobhook line with the fix, and a 500 the gateway retries.
app.use(createParserErrorHandler());
const server = app.listen(Number(process.env.PORT ?? 3000));
process.on('SIGTERM', () => server.close(() => void receiver.close()));
