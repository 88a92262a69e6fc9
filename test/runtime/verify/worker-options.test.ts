/**
 * Verification workers are ended once idle for WORKER_IDLE_MS, so the WebAssembly memory a
 * large body grew in one is returned; the next large delivery starts a new worker. Real
 * worker threads (Node's Worker, counted as they start and end), a real verifier and
 * real signatures.
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { nodeBuiltins } from '../../../src/lib/runtime/verify/node-threads.js';
import { createNodeVerifier } from '../../../src/lib/runtime/verify/node-verifier.js';
import { Offloader } from '../../../src/lib/runtime/verify/offload.js';
import { resolveWorkers, WORKER_IDLE_MS } from '../../../src/lib/runtime/verify/worker-options.js';
import { signed } from '../../helpers/deliveries.js';
import { publicPem } from '../../helpers/keys.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('verification workers', () => {
  it(
    `end after ${WORKER_IDLE_MS} ms idle, and a later large delivery starts a new one`,
    { timeout: 60_000 },
    async () => {
      let started = 0;
      let ended = 0;
      class CountedWorker extends Worker {
        constructor(...args: ConstructorParameters<typeof Worker>) {
          super(...args);
          started++;
          this.once('exit', () => void ended++);
        }
      }
      const builtins = {
        ...nodeBuiltins,
        workerThreads: async () => ({ ...(await nodeBuiltins.workerThreads()), Worker: CountedWorker }),
      };
      const verifier = createNodeVerifier({ publicKey: publicPem(2048), maxAgeSeconds: false });
      const pool = new Offloader(
        verifier,
        resolveWorkers({ workerThresholdBytes: 1024, workerPoolSize: 1 }),
        { debug() {}, info() {}, warn() {}, error() {} },
        builtins as never,
      );
      const verify = async (d: { body: string; headers: Record<string, string> }) =>
        (await pool.verifyOpened(d.body, await pool.open(d.headers))).delivery;
      try {
        const first = signed(`idle-a-${process.pid}`, `,"pad":"${'x'.repeat(4096)}"`);
        expect((await verify(first)).jobId).toBe(`idle-a-${process.pid}`);
        expect([started, ended]).toEqual([1, 0]);
        // Busy again before the idle time is up: the same worker.
        await sleep(WORKER_IDLE_MS / 2);
        await verify(first);
        expect([started, ended]).toEqual([1, 0]);
        // Idle for longer: ended.
        for (let waited = 0; ended === 0 && waited < WORKER_IDLE_MS * 3; waited += 100) await sleep(100);
        expect([started, ended]).toEqual([1, 1]);
        expect(pool.busy()).toEqual({ busy: 0, queued: 0 });
        // The next large delivery starts another.
        const second = signed(`idle-b-${process.pid}`, `,"pad":"${'y'.repeat(4096)}"`);
        expect((await verify(second)).jobId).toBe(`idle-b-${process.pid}`);
        expect(started).toBe(2);
      } finally {
        await pool.close();
      }
    },
  );

  it('closed before or while the pool is loaded (at the first costly body), refuse it with RECEIVER_BUSY and start no worker', async () => {
    let started = 0;
    class CountedWorker extends Worker {
      constructor(...args: ConstructorParameters<typeof Worker>) {
        super(...args);
        started++;
      }
    }
    const builtins = {
      ...nodeBuiltins,
      workerThreads: async () => ({ ...(await nodeBuiltins.workerThreads()), Worker: CountedWorker }),
    };
    const verifier = createNodeVerifier({ publicKey: publicPem(2048), maxAgeSeconds: false });
    const log = { debug() {}, info() {}, warn() {}, error() {} };
    const costly = signed(`closed-${process.pid}`, `,"pad":"${'x'.repeat(4096)}"`);
    const offloader = () =>
      new Offloader(
        verifier,
        resolveWorkers({ workerThresholdBytes: 1024, workerPoolSize: 1 }),
        log,
        builtins as never,
      );

    const before = offloader();
    await before.close();
    await expect(before.verifyOpened(costly.body, await before.open(costly.headers))).rejects.toMatchObject({
      code: 'RECEIVER_BUSY',
    });

    const during = offloader();
    const refused = during.verifyOpened(costly.body, await during.open(costly.headers));
    await during.close();
    await expect(refused).rejects.toMatchObject({ code: 'RECEIVER_BUSY' });
    expect(during.busy()).toEqual({ busy: 0, queued: 0 });
    expect(started).toBe(0);
  });
});
