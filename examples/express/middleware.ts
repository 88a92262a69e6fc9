import express from 'express';
import { createMiddleware } from 'jobhook/express';
import { saveOnce } from './results.js';

const app = express();
app.post(
  '/webhooks/gateway',
  createMiddleware({ publicKey: process.env.GATEWAY_PUBLIC_KEY! }),
  async (req, res) => {
    const { jobId, event } = req.webhook!; // verified: signature, canonical form, payload
    // Your own flow, without jobhook's idempotency store: here a table that records each job once.
    const first = await saveOnce(jobId, event);
    res.json({ status: first ? 'processed' : 'duplicate', job_id: jobId });
  },
);
app.use(express.json()); // for your other routes
app.listen(Number(process.env.PORT ?? 3000));
