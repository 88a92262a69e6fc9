// One production receiver: Express, a shared durable store (PostgreSQL, or Redis with
// appendonly yes), the reconciler for completions whose webhook never arrived, health and
// readiness that tell status and counts only, and a shutdown that closes everything.
import express from 'express';
import { createJobRunner } from 'jobhook';
import { createParserErrorHandler, createReceiver } from 'jobhook/express';
import { createGatewayClient, createReconciler } from 'jobhook/gateway';
import { PostgresIdempotencyStore } from 'jobhook/postgres';
import { RedisIdempotencyStore } from 'jobhook/redis';
import { handle } from './results.js';

const env = (name: string) => process.env[name] || undefined;

// Every instance shares one store: a job claimed on one is a duplicate on the others.
const pg = env('DATABASE_URL') && new PostgresIdempotencyStore({ connectionString: env('DATABASE_URL')! });
const store = pg || new RedisIdempotencyStore({ url: env('REDIS_URL') ?? 'redis://127.0.0.1:6379' });
// Fail fast: a wrong address or password stops the deployment here, named, with its fix.
if (pg) await pg.migrate(); // creates or upgrades the tables; safe on every start and from several instances at once
await store.ready();
if (pg) {
  // Expired claims and completions stay until purged: hourly, in short batches.
  setInterval(
    () => void pg.purgeExpired().catch((err: unknown) => console.error('purgeExpired failed', err)),
    3_600_000,
  ).unref();
}

// One runner (store, leases, repair queue) for the webhook path and the reconciler, so each job runs once whichever path brings it.
const runner = createJobRunner({ store });
const receiver = createReceiver({
  publicKey: env('GATEWAY_PUBLIC_KEY')!,
  runner,
  closeStores: true,
  onEvent: handle,
});

// The gateway gives up after 3 retries (about 3.5 min): jobs created through this client are tracked in the store,
// and the reconciler polls those still pending after graceMs (5 min) and runs each finished one through the same claim.
const gateway = createGatewayClient({ baseUrl: env('GATEWAY_URL')!, token: env('GATEWAY_TOKEN')!, store });
const reconciler = createReconciler({
  client: gateway,
  runner,
  onEvent: handle,
  graceMs: Number(env('RECONCILE_GRACE_MS') ?? 300_000),
  intervalMs: Number(env('RECONCILE_INTERVAL_MS') ?? 60_000),
});
reconciler.start();

const app = express();
app.post('/webhooks/gateway', receiver); // first: it reads the raw body itself, up to maxBodyBytes (25 MiB)
// Liveness: the process answers. Readiness: the store answers. Status and counts only, never an error text or address.
app.get('/healthz', (_req, res) => void res.json({ ok: true, pending: receiver.pending }));
app.get('/readyz', async (_req, res) => {
  const { ok, repairQueue, workers } = await receiver.health();
  res.status(ok ? 200 : 503).json({ ok, repairQueue, workers });
});
app.use(express.json()); // your other routes
app.post('/api/jobs', async (req, res) => {
  // Created through the client with the store: tracked as pending until its completion is processed.
  const job = await gateway.createJob({ ...req.body, webhook_receiver: env('WEBHOOK_URL')! });
  res.status(201).json({ public_id: job.public_id });
});
app.use(createParserErrorHandler()); // a delivery a body parser refused: one line with the fix, 500 so the gateway retries

const server = app.listen(Number(env('PORT') ?? 3000));
// Behind a load balancer: keep idle connections longer than its idle timeout (AWS ALB: 60 s), or it reuses closed ones.
server.keepAliveTimeout = 65_000;

process.once('SIGTERM', () => {
  // Stop polling (a round under way ends) and taking requests; once the last request is answered, finish the
  // store operations still waiting and close the store (closeStores): nothing is left open, so the process exits.
  const polling = reconciler.stop();
  server.close(() => void polling.then(() => receiver.close()));
});
