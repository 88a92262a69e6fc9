import express from 'express';
import { createReceiver } from 'jobhook/express';
import { markFailed, saveResult } from './results.js';

const receiver = createReceiver({
  publicKey: process.env.GATEWAY_PUBLIC_KEY!, // PEM (RSA PUBLIC KEY, PUBLIC KEY, CERTIFICATE), DER, JWK or KeyObject; an array during a rotation
  onEvent: async (event, { jobId }) => {
    if (event.status === 'success') await saveResult(jobId, event.output);
    else await markFailed(jobId, event.error.message);
  },
});
const app = express();
app.post('/webhooks/gateway', receiver); // before express.json(): it reads the raw body itself
app.use(express.json()); // for your other routes
app.post('/api/orders', (req, res) => void res.json({ received: req.body }));
const server = app.listen(Number(process.env.PORT ?? 3000));
// On shutdown: stop taking requests, then finish the store operations still waiting.
process.on('SIGTERM', () => server.close(() => void receiver.close()));
