import express from 'express';
import { createReceiver, keepRawBody } from 'jobhook/express';
import { markFailed, saveResult } from './results.js';

const app = express();
// A JSON parser that runs first keeps the raw bytes for the signature, and takes
// bodies as large as the receiver does (body-parser's default is 100 kB; 413 ends the gateway's retries).
app.use(express.json({ verify: keepRawBody, limit: '25mb' }));
app.post(
  '/webhooks/gateway',
  createReceiver({
    publicKey: process.env.GATEWAY_PUBLIC_KEY!,
    onEvent: async (event, { jobId }) => {
      if (event.status === 'success') await saveResult(jobId, event.output);
      else await markFailed(jobId, event.error.message);
    },
  }),
);
app.post('/api/orders', (req, res) => void res.json({ received: req.body }));
app.listen(Number(process.env.PORT ?? 3000));
