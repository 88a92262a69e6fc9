/**
 * The worker threads that verify costly bodies. Bounded: a few workers, a short queue,
 * RECEIVER_BUSY (503) past it. Node only. Loaded by offload.ts at the first costly
 * delivery (not when jobhook is imported: bench/import.mjs); node:worker_threads is
 * loaded when the pool starts its first worker. The options are in worker-options.ts.
 */
import type { Worker } from 'node:worker_threads';
import { ReceiverBusyError } from '../../base/errors.js';
import { errorDetails, type Logger } from '../../base/log.js';
import { reviveError } from '../../base/revive-error.js';
import type { DialectName } from '../../core/canonical/dialects.js';
import { parseDocument } from '../../core/canonical/parse.js';
import { documentValue } from '../../core/canonical/to-value.js';
import { deliveryFrom, type OpenedSignature, type VerifiedDelivery } from '../../core/verify/core.js';
import type { ResolvedOptions, VerifyOptionsBase } from '../../core/verify/options.js';
import { buildValue } from '../../core/verify/split.js';
import type { WorkerRequest, WorkerResponse } from './worker-messages.js';
import { WORKER_IDLE_MS, type NodeBuiltins } from './worker-options.js';

/** Starts a verification worker with the given workerData. */
type StartWorker = (workerData: unknown) => Worker;

/** What starting workers needs, loaded once, at the first large delivery. */
interface Threads {
  start: StartWorker;
  cores: number;
}

let threads: Promise<Threads> | undefined;

/** Loads node:worker_threads and finds the worker file: the built one next to this chunk. */
function loadThreads(builtins: NodeBuiltins): Promise<Threads> {
  threads ??= (async (): Promise<Threads> => {
    const [{ Worker }, { availableParallelism }] = await Promise.all([
      builtins.workerThreads(),
      builtins.os(),
    ]);
    const cores = availableParallelism();
    const here = import.meta.url;
    if (!here.endsWith('.ts')) {
      // One worker file for both builds: a worker thread is a module of its own, ESM whether its parent was loaded by import or require.
      const file = new URL('./verify-worker.js', here);
      return { cores, start: (workerData) => new Worker(file, { workerData }) };
    }
    return { cores, start: await sourceWorker(builtins, here, Worker) };
  })();
  // A failed load (a runtime without worker threads) is tried again by the next large delivery.
  threads.catch(() => {
    threads = undefined;
  });
  return threads;
}

/**
 * Running from source (this repository's tests): the worker is TypeScript too, loaded
 * through tsx's loader registered inside the worker (hooks are not inherited in Node 20).
 */
async function sourceWorker(
  builtins: NodeBuiltins,
  here: string,
  WorkerClass: typeof Worker,
): Promise<StartWorker> {
  const [{ createRequire }, { pathToFileURL }] = await Promise.all([builtins.module(), builtins.url()]);
  const tsx = new URL(
    'dist/esm/api/index.mjs',
    pathToFileURL(createRequire(here).resolve('tsx/package.json')),
  ).href;
  // Not new URL('./verify-worker.ts', import.meta.url): bundlers (Next.js's Turbopack) resolve that
  // pattern at build time, and the built package has no .ts file.
  const file = here.slice(0, here.lastIndexOf('/') + 1) + 'verify-worker.ts';
  const code = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(file)}); });`;
  return (workerData) => new WorkerClass(code, { eval: true, workerData });
}

/** The options a worker needs to match a body: no keys (the signature is opened here), no functions. */
function portable(resolved: ResolvedOptions): VerifyOptionsBase {
  const { dialects, maxBodyBytes, maxCanonicalBytes, integers, maxDepth } = resolved;
  return { dialects, maxBodyBytes, maxCanonicalBytes, integers, maxDepth };
}

interface Task {
  request: WorkerRequest;
  /** The body's memory may be moved to the worker (nobody else holds it) rather than copied. */
  movable: boolean;
  resolve: (r: WorkerResponse) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  task: Task | undefined;
  /** Ends the worker once it has been idle for WORKER_IDLE_MS. */
  idle?: ReturnType<typeof setTimeout>;
}

const closing = () => new ReceiverBusyError('The receiver is shutting down; retry later.');

/** The verification workers of one receiver: started on first use, ended when idle. */
export class WorkerPool {
  /** Known once the threads are loaded (the default counts the cores). */
  private size = 0;
  private start: StartWorker | undefined;
  private readonly slots: Slot[] = [];
  private readonly queue: Task[] = [];
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly builtins: NodeBuiltins,
    private readonly resolved: ResolvedOptions,
    private readonly poolSize: number | undefined,
    private readonly log: Logger,
  ) {}

  /** Loads the threads at first use (rejects where they cannot be loaded: verify on the calling thread then). */
  async load(): Promise<void> {
    if (this.closed) throw closing();
    if (this.start !== undefined) return;
    const loaded = await loadThreads(this.builtins);
    if (this.closed) throw closing();
    this.size = this.poolSize ?? Math.max(1, Math.min(4, loaded.cores - 1));
    this.start = loaded.start;
  }

  /** Matches `body` against what opened its signature, on a worker (RECEIVER_BUSY when the queue is full). Call `load()` first. */
  run(body: Uint8Array, opened: WorkerRequest['opened'], movable: boolean): Promise<WorkerResponse> {
    if (this.closed) return Promise.reject(closing());
    if (this.queue.length >= 8 * this.size)
      return Promise.reject(
        new ReceiverBusyError(
          `${this.queue.length} large deliveries are waiting for the verification workers; retry later.`,
        ),
      );
    return new Promise<WorkerResponse>((resolve, reject) => {
      this.queue.push({ request: { id: this.nextId++, body, opened }, movable, resolve, reject });
      this.next();
    });
  }

  /**
   * Matches `body` on a worker against its signature, opened on the calling thread, then
   * builds the event here from what the worker found: in slices, yielding between them,
   * when the worker sent a plan. With the SHA-256 of the raw body the worker took on the
   * way. Call `load()` first.
   */
  async verify(
    body: Uint8Array,
    signature: OpenedSignature,
    movable: boolean,
  ): Promise<{ delivery: VerifiedDelivery; rawSha256: string }> {
    const opened = signature.opened.map(({ keyIndex, hash }) => ({ keyIndex, hash }));
    const response = await this.run(body, opened, movable);
    if ('error' in response) throw reviveError(response.error);
    const { dialect, keyIndex, canonicalSha256, plan, rawSha256 } = response.ok;
    const resolved = this.resolved;
    // The body came back (moved, or the worker's copy).
    const back = response.body;
    const value =
      plan === undefined
        ? documentValue(
            parseDocument(back, { maxDepth: resolved.maxDepth }),
            resolved.integers,
            dialect as DialectName,
          )
        : await buildValue(back, plan);
    return {
      delivery: deliveryFrom(value, resolved, dialect as DialectName, keyIndex, canonicalSha256),
      rawSha256,
    };
  }

  /** Verifications on a worker now, and waiting for one. */
  workers(): { busy: number; queued: number } {
    return { busy: this.slots.filter((s) => s.task !== undefined).length, queued: this.queue.length };
  }

  /** Stops the workers; deliveries still waiting for one are refused (RECEIVER_BUSY, 503: the gateway retries). */
  async close(): Promise<void> {
    this.closed = true;
    // Nothing waits for an answer that will not come: queued and running deliveries are refused.
    for (const task of this.queue.splice(0)) task.reject(closing());
    const all = this.slots.splice(0);
    for (const s of all) {
      s.task?.reject(closing());
      s.task = undefined;
      if (s.idle !== undefined) clearTimeout(s.idle);
    }
    await Promise.all(all.map((s) => s.worker.terminate()));
  }

  private spawn(): Slot {
    const slot: Slot = { worker: this.start!(portable(this.resolved)), task: undefined };
    slot.worker.unref();
    slot.worker.on('message', (r: WorkerResponse) => {
      const task = slot.task;
      slot.task = undefined;
      task?.resolve(r);
      this.next();
    });
    slot.worker.on('error', (err) => this.failed(slot, err));
    slot.worker.on('exit', (code) => {
      if (this.slots.includes(slot))
        this.failed(slot, new Error(`the verification worker exited with code ${code}`));
    });
    this.slots.push(slot);
    return slot;
  }

  private failed(slot: Slot, err: Error): void {
    const at = this.slots.indexOf(slot);
    if (at >= 0) this.slots.splice(at, 1);
    this.log.error('jobhook: a verification worker failed', errorDetails(err));
    slot.task?.reject(err);
    slot.task = undefined;
    this.next();
  }

  /** Hands queued tasks to free workers (starting one while under the pool's size). */
  private next(): void {
    while (this.queue.length > 0) {
      let slot = this.slots.find((s) => s.task === undefined);
      if (slot === undefined && this.slots.length < this.size) slot = this.spawn();
      if (slot === undefined) return;
      const task = this.queue.shift()!;
      slot.task = task;
      if (slot.idle !== undefined) clearTimeout(slot.idle);
      slot.idle = undefined;
      slot.worker.ref();
      const { body } = task.request;
      const movable =
        task.movable &&
        body.byteOffset === 0 &&
        body.byteLength === body.buffer.byteLength &&
        body.buffer instanceof ArrayBuffer;
      slot.worker.postMessage(task.request, movable ? [body.buffer as ArrayBuffer] : []);
    }
    for (const s of this.slots) if (s.task === undefined) this.idle(s);
  }

  private idle(slot: Slot): void {
    slot.worker.unref();
    if (slot.idle !== undefined) return;
    slot.idle = setTimeout(() => {
      slot.idle = undefined;
      const at = this.slots.indexOf(slot);
      if (slot.task !== undefined || at < 0) return;
      // Out of the pool first, so that its exit is not taken for a failure.
      this.slots.splice(at, 1);
      void slot.worker.terminate();
    }, WORKER_IDLE_MS);
    slot.idle.unref?.();
  }
}
