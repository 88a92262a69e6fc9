/**
 * NATS JetStream on both sides of the queue: a receiver's `onEvent` that publishes the
 * verified event with `Nats-Msg-Id` = `job_id` (JetStream drops a second publish of the
 * same id within the stream's `duplicate_window` and answers it with a duplicate PubAck),
 * and a consumer that runs the user's function for each message through the job runner
 * and acknowledges it only once the job is done.
 */
import type { JetStreamClient, JsMsg } from 'nats';
import type { JobCompletedEvent } from '../core/event.js';
import type { Logger } from '../base/log.js';
import type { JobRunner, RunResult } from '../jobs/runner.js';
import {
  acknowledged,
  checkRetainMs,
  checkTimeoutMs,
  eventText,
  queuedEvent,
  resolveWorker,
  retryDelayMs,
  runQueued,
  type QueuedEventHandler,
  type QueueHandoff,
  type QueueWorkerOptionsBase,
} from './contract.js';

export interface JetStreamHandlerOptions {
  /** The subject to publish on; the stream must capture it. */
  subject: string;
  /** The stream that must take the events: checked (subjects, `duplicate_window`) and required of every PubAck. */
  stream: string;
  /**
   * How long JetStream must still drop a second publish of a job id (default 5 min; at
   * least the gateway's retry horizon, 210 s): the stream's `duplicate_window` must be at
   * least this long, or the handler refuses to publish.
   */
  retainMs?: number;
  /** How long to wait for the PubAck before answering 5xx (default 5 s). */
  timeoutMs?: number;
}

/** The `onEvent` of `createJetStreamHandler`, with the stream check it started. */
export interface JetStreamHandoff extends QueueHandoff {
  /**
   * Settles when the stream check made at construction does: rejects with a TypeError
   * naming the setting when the stream does not fit (no such stream, subject not
   * captured, memory storage, `duplicate_window` shorter than `retainMs`), or when JetStream did not
   * answer (then each delivery checks again before publishing). Await it at startup to
   * fail fast; deliveries wait for a passed check in any case.
   */
  readonly ready: Promise<void>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Whether NATS subject `subject` matches the stream's `pattern` (`*` one token, `>` the rest). */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

function checkName(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '' || /[\s]/.test(value))
    throw new TypeError(`${what} must be a non-empty NATS name without spaces; got ${JSON.stringify(value)}`);
  return value;
}

function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown; api_error?: { err_code?: number } };
  return e?.api_error?.err_code === 10059 || /stream not found/i.test(String(e?.message));
}

/** Reads the stream's configuration and refuses one that cannot keep the handler's promise. */
async function checkStream(
  js: JetStreamClient,
  stream: string,
  subject: string,
  retainMs: number,
): Promise<void> {
  let config;
  try {
    const jsm = await js.jetstreamManager();
    config = (await jsm.streams.info(stream)).config;
  } catch (err) {
    if (isNotFound(err))
      throw new TypeError(
        `JetStream has no stream "${stream}" (the stream option): create it with the subject "${subject}" and duplicate_window of at least ${retainMs / 1000} s`,
      );
    throw err;
  }
  if (!(config.subjects ?? []).some((p) => subjectMatches(p, subject))) {
    throw new TypeError(
      `The JetStream stream "${stream}" does not capture the subject "${subject}" (its subjects: ${JSON.stringify(config.subjects ?? [])}): add it, or publish on one of them`,
    );
  }
  if (String(config.storage) === 'memory') {
    throw new TypeError(
      `The JetStream stream "${stream}" keeps its messages in memory (storage: memory): its PubAck does not survive a restart of nats-server, so the receiver would answer 200 for events a restart loses. ` +
        `Use a stream with file storage (the storage of a stream cannot be edited: create one with storage: file, e.g. \`nats stream add ${stream} --storage file\`, and move the subject to it)`,
    );
  }
  const windowMs = Number(config.duplicate_window ?? 0) / 1e6;
  if (!(windowMs >= retainMs)) {
    throw new TypeError(
      `The JetStream stream "${stream}" drops a repeated Nats-Msg-Id for ${windowMs / 1000} s (duplicate_window), less than the ${retainMs / 1000} s a job id must be deduplicated (retainMs: the gateway's retries, 210 s, plus headroom): ` +
        `raise duplicate_window to at least ${retainMs / 1000} s (for example \`nats stream edit ${stream} --dupe-window ${Math.ceil(retainMs / 60_000)}m\`, or duplicate_window: ${retainMs * 1e6} in nanoseconds in the stream's configuration), or lower retainMs`,
    );
  }
}

/**
 * An `onEvent` for a receiver that publishes each verified event to `subject` with
 * `Nats-Msg-Id` = `job_id` and returns once the PubAck came from `stream` (a duplicate
 * PubAck, for a job id the stream already took, counts as done), so the receiver
 * answers 200 only for events the stream holds. JetStream drops a repeated message id
 * only within the stream's `duplicate_window`, so at construction it starts checking the
 * stream (the client's API is asynchronous: the outcome is `handler.ready`, and every
 * delivery waits for a passed check): the stream must exist, capture `subject`, and keep
 * `duplicate_window` ≥ `retainMs` (default 5 min: the gateway's retries, 210 s, plus
 * headroom; JetStream's own default is 2 min), else a TypeError naming `duplicate_window`.
 * No PubAck within `timeoutMs` (default 5 s): it throws a `StoreUnavailableError`, so the
 * receiver answers 5xx and the gateway retries.
 *
 * @example
 * ```ts
 * import { connect } from 'nats';
 * import { createReceiver } from 'jobhook/express';
 * import { createJetStreamHandler } from 'jobhook/nats';
 *
 * const nc = await connect({ servers: 'nats:4222' });
 * // once: await (await nc.jetstreamManager()).streams.add({ name: 'GATEWAY', subjects: ['gateway.events'], storage: StorageType.File, duplicate_window: 300e9 });
 * const onEvent = createJetStreamHandler(nc.jetstream(), { subject: 'gateway.events', stream: 'GATEWAY' });
 * await onEvent.ready; // fail at startup, not at the first delivery
 * app.post('/webhooks/gateway', createReceiver({ publicKey, store, onEvent }));
 * ```
 * @throws TypeError for bad options (synchronously); `ready` rejects for a stream that does not fit.
 *
 * The receiving side: an `onEvent` that publishes the event to `subject` with
 * `Nats-Msg-Id` = `job_id`, requires the PubAck to come from `stream` (a duplicate
 * PubAck counts as done), and returns once it came. The stream check starts at
 * construction: the client's API is asynchronous, so its outcome is `ready`, and each
 * delivery waits for a passed check before publishing.
 */
export function createJetStreamHandoff(
  js: JetStreamClient,
  options: JetStreamHandlerOptions,
): JetStreamHandoff {
  if (
    typeof js !== 'object' ||
    js === null ||
    typeof js.publish !== 'function' ||
    typeof js.jetstreamManager !== 'function'
  )
    throw new TypeError('js must be a JetStream client (nc.jetstream())');
  if (typeof options !== 'object' || options === null)
    throw new TypeError('options must be an object with subject and stream');
  const subject = checkName(options.subject, 'subject');
  const stream = checkName(options.stream, 'stream');
  const retainMs = checkRetainMs(options.retainMs);
  const timeoutMs = checkTimeoutMs(options.timeoutMs);
  let passed: Promise<void> | undefined;
  let ok = false;
  // A failed check is not kept: the next delivery checks again (a stream fixed meanwhile, JetStream back).
  const check = (): Promise<void> =>
    (passed ??= checkStream(js, stream, subject, retainMs).then(
      () => void (ok = true),
      (err: unknown) => {
        passed = undefined;
        throw err;
      },
    ));
  const ready = check();
  ready.catch(() => undefined);
  const handoff = async (_event: JobCompletedEvent, { jobId, payload }: Parameters<QueueHandoff>[1]) => {
    const what = `publishing job ${jobId} to the JetStream stream "${stream}"`;
    if (!ok) {
      try {
        await acknowledged(check(), timeoutMs, `checking the JetStream stream "${stream}"`);
      } catch (err) {
        // A stream that does not fit stays a TypeError (misconfiguration); JetStream not answering is a 5xx like any outage.
        if ((err as { cause?: unknown }).cause instanceof TypeError)
          throw (err as { cause: TypeError }).cause;
        throw err;
      }
    }
    const ack = await acknowledged(
      js.publish(subject, encoder.encode(eventText(payload)), {
        msgID: jobId,
        timeout: timeoutMs,
        expect: { streamName: stream },
      }),
      timeoutMs + 250,
      what,
    );
    if (ack.stream !== stream)
      throw new TypeError(`${what}: the PubAck came from the stream "${ack.stream}"`);
  };
  return Object.assign(handoff, { ready });
}

/** Options of `createJetStreamWorker`. */
export interface JetStreamWorkerOptions<Tx = unknown> extends QueueWorkerOptionsBase<Tx> {
  /** The stream the consumer reads. */
  stream: string;
  /** A durable pull consumer of that stream (made with the JetStream manager), with explicit acks. */
  consumer: string;
  /** Messages processed at a time (default 8). */
  concurrency?: number;
}

export interface JetStreamWorker {
  /** Resolves when the worker stopped (after `close()`), rejects if consuming failed. */
  readonly closed: Promise<void>;
  /** Stops taking messages and waits for the ones being processed. */
  close(): Promise<void>;
  /** Messages being processed. */
  readonly running: number;
}

/**
 * Consumes a durable pull consumer and runs `onEvent` once per message's job through
 * the job runner (claimed in the store under `work:<job_id>`, renewed while it runs,
 * completed after it), and acks the message only then. With
 * `PostgresIdempotencyStore({ transactional: true })`, writes through
 * `context.transaction` happen exactly once; otherwise at least once, and every job that
 * may have run twice (a worker killed mid-job) is reported to `onError` (stage
 * `superseded`). A throwing `onEvent`, a job held by another worker or a store outage:
 * the message is nak'ed with a delay and delivered again.
 *
 * @example
 * ```ts
 * import { createJetStreamWorker } from 'jobhook/nats';
 *
 * // once: await jsm.consumers.add('GATEWAY', { durable_name: 'workers', ack_policy: AckPolicy.Explicit });
 * const worker = createJetStreamWorker(nc.jetstream(), {
 *   stream: 'GATEWAY',
 *   consumer: 'workers',
 *   store,
 *   onEvent: async (event, { transaction }) => save(event, transaction),
 * });
 * process.on('SIGTERM', () => void worker.close());
 * ```
 *
 * The working side: consumes `consumer` of `stream` and runs the user's function for
 * each message through the job runner. Done (processed now, or before): the message is
 * acknowledged, only then. Otherwise it is not acknowledged (`nak` with a delay: after a
 * failing function 1, 2, 4… 30 s; the lease's time left when another worker holds the
 * job), so JetStream delivers it again. While the function runs, the message's ack
 * deadline is extended (`working()`), so a slow function is not redelivered. A message
 * that is not an event of `createJetStreamHandler` is terminated (`term`) and reported.
 */
export function createJetStreamWorkerCore<Tx = unknown>(
  js: JetStreamClient,
  options: JetStreamWorkerOptions<Tx>,
): JetStreamWorker {
  if (typeof js !== 'object' || js === null || typeof js.consumers?.get !== 'function')
    throw new TypeError('js must be a JetStream client (nc.jetstream())');
  const worker = new JetStreamConsumer(js, resolveJetStreamWorker(options));
  return {
    closed: worker.closed,
    close: () => worker.close(),
    get running() {
      return worker.running;
    },
  };
}

/** The worker's options, checked and resolved once. */
interface JetStreamWorkerSettings<Tx> {
  readonly runner: JobRunner;
  readonly onEvent: QueuedEventHandler<Tx>;
  readonly stream: string;
  readonly consumerName: string;
  readonly concurrency: number;
  /** The runner's, taken once. */
  readonly log: Logger;
}

function resolveJetStreamWorker<Tx>(options: JetStreamWorkerOptions<Tx>): JetStreamWorkerSettings<Tx> {
  const { runner, onEvent } = resolveWorker(options);
  const stream = checkName(options.stream, 'stream');
  const consumerName = checkName(options.consumer, 'consumer');
  const concurrency = options.concurrency ?? 8;
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new TypeError(`concurrency must be an integer ≥ 1; got ${String(concurrency)}`);
  return Object.freeze({ runner, onEvent, stream, consumerName, concurrency, log: runner.options.log });
}

/** One worker: consumes until closed, at most `concurrency` messages at a time. */
class JetStreamConsumer<Tx> {
  /** Messages being processed. */
  running = 0;
  private stopping = false;
  private messages: { close(): Promise<void | Error> } | undefined;
  readonly closed: Promise<void>;

  constructor(
    private readonly js: JetStreamClient,
    private readonly s: JetStreamWorkerSettings<Tx>,
  ) {
    this.closed = this.consume();
    this.closed.catch((err: unknown) =>
      s.log.error(`jobhook: consuming ${s.consumerName} of the JetStream stream ${s.stream} stopped`, {
        error: err instanceof Error ? err.message : String(err),
      }),
    );
  }

  async close(): Promise<void> {
    this.stopping = true;
    await this.messages?.close();
    await this.closed.catch(() => undefined);
  }

  private async consume(): Promise<void> {
    const { stream, consumerName, concurrency, runner } = this.s;
    const consumer = await this.js.consumers.get(stream, consumerName);
    const info = await consumer.info(true);
    const ackWaitMs = Number(info.config.ack_wait ?? 30e9) / 1e6;
    if (this.stopping) return;
    const iterator = await consumer.consume({ max_messages: concurrency });
    this.messages = iterator;
    const inFlight = new Set<Promise<void>>();
    for await (const msg of iterator) {
      this.running++;
      const task: Promise<void> = this.handle(msg, ackWaitMs)
        .catch((err: unknown) => {
          runner.report('handler', err, undefined);
          msg.nak(1_000);
        })
        .finally(() => {
          this.running--;
          inFlight.delete(task);
        });
      inFlight.add(task);
      if (inFlight.size >= concurrency) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
  }

  private async handle(msg: JsMsg, ackWaitMs: number): Promise<void> {
    const event = this.decode(msg);
    if (event === undefined) return;
    const delivery = msg.info.redeliveryCount;
    // Keep the message ours while the function runs, so JetStream does not hand it to another worker.
    const heartbeat = setInterval(() => msg.working(), Math.max(100, Math.floor(ackWaitMs / 3)));
    let result: RunResult;
    try {
      result = await runQueued(this.s.runner, this.s.onEvent, event, delivery);
    } finally {
      clearInterval(heartbeat);
    }
    if (result.kind === 'processed' || result.kind === 'duplicate') {
      // A lost ack only brings the message back, answered as a duplicate then.
      await msg
        .ackAck()
        .catch((err: unknown) =>
          this.s.log.debug(
            `jobhook: the ack of job ${event.job_id} was not confirmed; JetStream may deliver it again (a duplicate)`,
            { error: String(err) },
          ),
        );
      return;
    }
    msg.nak(retryDelayMs(result, delivery));
  }

  /** The message's event; a message that is not one is terminated and reported (undefined). */
  private decode(msg: JsMsg): JobCompletedEvent | undefined {
    try {
      const event = queuedEvent(decoder.decode(msg.data));
      const id = msg.headers?.get('Nats-Msg-Id');
      if (id !== undefined && id !== '' && id !== event.job_id)
        throw new TypeError(`its Nats-Msg-Id ${JSON.stringify(id)} is not its job_id`);
      return event;
    } catch (err) {
      this.s.runner.report(
        'body',
        new TypeError(
          `not a jobhook event (terminated): ${err instanceof Error ? err.message : String(err)}`,
          { cause: err },
        ),
      );
      // Without a reason: servers before 2.11 do not take "+TERM <reason>" as a termination.
      msg.term();
      return undefined;
    }
  }
}
