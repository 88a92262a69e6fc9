/**
 * The global OpenTelemetry API with no SDK registered costs a delivery nothing (no span is
 * made), and an SDK registered after the receiver was made is used from then on (within
 * a second). A file of its own: it sets the process's global tracer provider.
 */
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, describe, expect, it } from 'vitest';
import { createReceiver } from '../../src/index.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';

afterAll(() => trace.disable());

describe('telemetry through the global API', () => {
  it('no spans while no SDK is registered; the SDK registered later records the next deliveries', async () => {
    const receive = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log: false });
    const exporter = new InMemorySpanExporter();
    expect((await receive(signed(jobId('before-sdk')))).status).toBe(200);
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    expect(exporter.getFinishedSpans()).toEqual([]);
    // Asked again at most every second.
    await new Promise((r) => setTimeout(r, 1100));
    expect((await receive(signed(jobId('after-sdk')))).status).toBe(200);
    const names = exporter.getFinishedSpans().map((s) => s.name);
    expect(names).toContain('jobhook.receive');
    expect(names).toContain('jobhook.verify');
    await receive.close();
  });
});
