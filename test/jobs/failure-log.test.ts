/**
 * The runner's failures in the log: loud, never a flood. A store that is down (a real
 * Redis port with nothing listening) or a body that was never kept fails every delivery
 * alike: the first is logged with its cause, the rest counted into one summary line per
 * interval; onError still hears each; a handler's failure is told every time; `log:
 * false` silences them.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createJobRunner, createReceiver } from '../../src/index.js';
import { StoreUnavailableError } from '../../src/errors.js';
import { FailureLog } from '../../src/lib/jobs/failure-log.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { recorder } from '../adapters/receiver-table.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { availability, freePort } from '../helpers/servers.js';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const publicKey = publicPem(2048);

describe('FailureLog', () => {
  it('a store failure: the first in full, the rest counted into one summary line per interval; a new cause gets its own first line; handler failures each', () => {
    vi.useFakeTimers();
    const { lines, log } = recorder();
    const failures = new FailureLog(log as never);
    const refused = new StoreUnavailableError('Redis at 127.0.0.1:1 failed on claim: connection refused', {
      cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    });
    for (let k = 0; k < 100; k++)
      failures.tell('claim', 'the idempotency store failed to claim', refused, `job-${k}`);
    const timedOut = new StoreUnavailableError('Redis at 127.0.0.1:1 did not answer claim within 2000 ms.');
    failures.tell('claim', 'the idempotency store failed to claim', timedOut, 'job-x');
    for (let k = 0; k < 3; k++)
      failures.tell('handler', 'the handler failed', new Error('boom'), `job-h${k}`);
    expect(lines.error.filter((l) => l.includes('failed to claim'))).toHaveLength(2);
    expect(lines.error[0]).toMatch(
      /^jobhook: the idempotency store failed to claim for job job-0: Redis at 127\.0\.0\.1:1 failed on claim: connection refused/,
    );
    expect(lines.error.filter((l) => l.includes('the handler failed'))).toHaveLength(3);
    vi.advanceTimersByTime(60_000);
    expect(lines.error.at(-1)).toBe(
      'jobhook: 99 more in the last 60 s: the idempotency store failed to claim (STORE_UNAVAILABLE)',
    );
    failures.tell('claim', 'the idempotency store failed to claim', refused, 'job-next');
    expect(lines.error.at(-1)).toMatch(/failed to claim for job job-next: /);
  });
});

describe('the runner and receivers', () => {
  it('BODY_UNAVAILABLE on every delivery: one error line with the fix, onError hears each', async () => {
    const { lines, log } = recorder();
    let heard = 0;
    const receive = createReceiver({ publicKey, log, onError: () => void heard++, onEvent: () => undefined });
    for (let k = 0; k < 20; k++) {
      const d = signed(jobId('parsed'));
      expect((await receive({ body: JSON.parse(d.body) as never, headers: d.headers })).status).toBe(500);
    }
    expect(heard).toBe(20);
    expect(lines.error).toHaveLength(1);
    expect(lines.error[0]).toMatch(
      /the request body could not be read: The body given is a parsed object.*keepRawBody/,
    );
    await receive.close();
  });

  it.skipIf(availability('redis').skip)(
    'a Redis store nobody listens for: every delivery 503, one error line naming the address and ECONNREFUSED; log: false prints nothing',
    async () => {
      const port = await freePort();
      const store = new RedisIdempotencyStore({
        url: `redis://127.0.0.1:${port}`,
        operationTimeoutMs: 500,
        log: false,
      });
      const { lines, log } = recorder();
      const receive = createReceiver({ publicKey, store, log, onEvent: () => undefined });
      for (let k = 0; k < 6; k++) expect((await receive(signed(jobId('down')))).status).toBe(503);
      expect(lines.error).toHaveLength(1);
      expect(lines.error[0]).toMatch(
        new RegExp(
          `failed to claim for job .*: Redis at 127\\.0\\.0\\.1:${port} failed on claim: connection refused.*ECONNREFUSED`,
        ),
      );
      await receive.close(100);

      const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
      const runner = createJobRunner({ store, log: false });
      for (let k = 0; k < 3; k++)
        expect(await runner.run(jobId('silent'), () => undefined)).toEqual({ kind: 'store_unavailable' });
      await runner.close(100);
      expect([error.mock.calls.length, warn.mock.calls.length]).toEqual([0, 0]);
      await store.close();
    },
  );
});
