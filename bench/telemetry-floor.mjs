// Issue 20: the floor of telemetry's cost per delivery, paid to the OpenTelemetry SDK itself
// whatever jobhook does: a bare loop making, per "delivery", exactly the telemetry calls one
// processed delivery makes in jobhook (bench/telemetry-sdk-calls.mjs).
// Contenders, in interleaved rounds: bare (the same awaits, no telemetry), metrics, traces,
// metrics+traces. Same SDK set-up as bench/telemetry.mjs. Reported: CPU µs per delivery and
// the difference to bare (= the SDK's floor for that contender).
//   node bench/telemetry-floor.mjs
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { load, machine, median, spread, table } from './harness.mjs';
import { sdkCalls } from './telemetry-sdk-calls.mjs';

const PER_ROUND = 2000;
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const WARMUP = 2;

class Reader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}
const dropping = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const meterProvider = new MeterProvider({ readers: [new Reader()] });
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] });
const delivery = sdkCalls(meterProvider, tracerProvider);

const contenders = {
  bare: [false, false],
  metrics: [true, false],
  traces: [false, true],
  'metrics+traces': [true, true],
};
console.log(`bench/telemetry-floor: ${machine()}; load ${load()}`);
const cpu = Object.fromEntries(Object.keys(contenders).map((n) => [n, []]));
for (let r = 0; r < WARMUP + ROUNDS; r++) {
  for (const [name, [metrics, traced]] of Object.entries(contenders)) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < PER_ROUND; i++) await delivery(metrics, traced);
    const c = process.cpuUsage(c0);
    if (r >= WARMUP) cpu[name].push((c.user + c.system) / PER_ROUND);
  }
}
const rows = Object.entries(cpu).map(([name, xs]) => {
  const diffs = xs.map((x, i) => x - cpu.bare[i]);
  return {
    contender: name,
    'CPU µs/delivery': median(xs).toFixed(2),
    'spread µs': spread(xs, 2),
    'SDK floor µs (− bare, per round)':
      name === 'bare' ? '—' : `${median(diffs).toFixed(2)} (${spread(diffs, 2)})`,
  };
});
console.log(`\n${ROUNDS} rounds × ${PER_ROUND} deliveries, load after: ${load()}\n`);
console.log(table(rows));
await tracerProvider.shutdown();
await meterProvider.shutdown();
