// The OpenTelemetry calls one processed delivery makes in jobhook, made directly on the SDK
// (no jobhook code around them): what telemetry costs at the least, whoever makes the calls.
//   spans: jobhook.receive (active, kind server, an async function inside it) with 3 attributes;
//          children verify, claim, handler, complete (startSpan, end), each around an await;
//   records: body.size, verify.duration, delivery.lag {adapter}; handler.duration {};
//            store.duration ×2 {op, store, result}; deliveries.add {outcome, adapter, dialect}
//            (attribute objects made once: the SDK's own cost only).
// Used by bench/telemetry-floor.mjs (alone) and bench/telemetry.mjs (inside an `off` receiver's onEvent).
const SECONDS = {
  advice: {
    explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  },
};
const ADAPTER = { adapter: 'agnostic' };
const CLAIMED = { op: 'claim', store: 'memory', result: 'acquired' };
const COMPLETED = { op: 'complete', store: 'memory', result: 'completed' };
const PROCESSED = { outcome: 'processed', adapter: 'agnostic', dialect: 'v1' };
const INTERNAL = { kind: 0 };
const SERVER = { kind: 1, attributes: { 'jobhook.adapter': 'agnostic' } };
const tick = async () => undefined;

/** `delivery(metrics, traced)`: one delivery's calls (a promise), on instruments and a tracer made once here. */
export function sdkCalls(meterProvider, tracerProvider) {
  const meter = meterProvider.getMeter('jobhook-floor', '0.1.0');
  const tracer = tracerProvider.getTracer('jobhook-floor', '0.1.0');
  const m = {
    deliveries: meter.createCounter('floor.deliveries'),
    verify: meter.createHistogram('floor.verify.duration', SECONDS),
    handler: meter.createHistogram('floor.handler.duration', SECONDS),
    lag: meter.createHistogram('floor.delivery.lag'),
    store: meter.createHistogram('floor.store.duration', SECONDS),
    body: meter.createHistogram('floor.body.size'),
  };
  async function phase(traced, name, fn) {
    if (!traced) return fn();
    const span = tracer.startSpan(name, INTERNAL);
    try {
      return await fn();
    } finally {
      span.end();
    }
  }
  return function delivery(metrics, traced) {
    const body = async (span) => {
      if (metrics) m.body.record(1400, ADAPTER);
      await phase(traced, 'jobhook.verify', tick);
      if (metrics) m.verify.record(0.00004, ADAPTER);
      span?.setAttribute('jobhook.job_id', 'job-1');
      span?.setAttribute('jobhook.dialect', 'v1');
      if (metrics) m.lag.record(5, ADAPTER);
      await phase(traced, 'jobhook.claim', async () => {
        await tick();
        if (metrics) m.store.record(0.000002, CLAIMED);
      });
      await phase(traced, 'jobhook.handler', tick);
      if (metrics) m.handler.record(0.000001);
      await phase(traced, 'jobhook.complete', async () => {
        await tick();
        if (metrics) m.store.record(0.000002, COMPLETED);
      });
      if (metrics) m.deliveries.add(1, PROCESSED);
    };
    if (!traced) return body(undefined);
    return tracer.startActiveSpan('jobhook.receive', SERVER, async (span) => {
      try {
        return await body(span);
      } finally {
        span.end();
      }
    });
  };
}
