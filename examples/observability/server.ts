import express from 'express';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { createReceiver } from 'jobhook/express';
import { saveResult } from './results.js';
import { store } from './store.js';

// Prometheus scrapes http://127.0.0.1:9464/metrics (the exporter's own server, on loopback: its metrics
// name your jobs' outcomes; a Prometheus on another host scrapes it through a route you choose).
const prometheus = new PrometheusExporter({
  host: '127.0.0.1',
  port: Number(process.env.METRICS_PORT ?? 9464),
});
const meterProvider = new MeterProvider({ readers: [prometheus] });

const receiver = createReceiver({
  publicKey: process.env.GATEWAY_PUBLIC_KEY!,
  store, // Redis or PostgreSQL (./store.ts); undefined: memory, one process
  closeStores: true,
  meterProvider, // or register it globally (metrics.setGlobalMeterProvider): jobhook uses the global one by default
  onEvent: async (event, { jobId }) => {
    if (event.status === 'success') await saveResult(jobId, event.output);
  },
});
const app = express();
app.post('/webhooks/gateway', receiver);
// Kubernetes readinessProbe: httpGet /readyz. 503 while the idempotency store does not answer;
// the status only (the store's error, with its address, goes to the log, not to whoever asks).
app.get('/readyz', async (_req, res) => void res.sendStatus((await receiver.health()).ok ? 200 : 503));
const server = app.listen(Number(process.env.PORT ?? 3000));
process.on('SIGTERM', () => server.close(() => void Promise.all([receiver.close(), prometheus.shutdown()])));
