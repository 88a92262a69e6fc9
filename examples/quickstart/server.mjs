import express from 'express';
import { createReceiver } from 'jobhook/express';

const receiver = createReceiver({
  publicKey: process.env.GATEWAY_PUBLIC_KEY, // the gateway's RSA public key (PEM)
  onEvent: async (event, { jobId }) => {
    console.log(`job ${jobId}: ${event.status}`); // your work, once per job; throw to have the gateway retry
  },
});
const app = express();
app.post('/webhooks/gateway', receiver); // before any body parser: it reads the raw body itself
const server = app.listen(Number(process.env.PORT ?? 3000));
process.on('SIGTERM', () => server.close(() => void receiver.close())); // then the process exits
