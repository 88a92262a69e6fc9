/**
 * The receivers under test: real HTTP servers on loopback, one per instance, all
 * sharing one idempotency store (each with its own client or pool), and a handler
 * that records every completed run.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { IdempotencyStore, JobCompletedEvent } from '../../../src/index.js';
import * as jobhookExpress from '../../../src/express.js';
import type { NodeHandler } from '../../../src/express.js';

export interface FaultReceiverOptions {
  publicKey: string;
  store: IdempotencyStore;
  onEvent: (event: JobCompletedEvent, context: { jobId: string }) => Promise<void>;
  leaseMs?: number;
  /** Failures the receiver reports besides its answer (a completion or release the store refused). */
  onError?: (error: unknown, context: { jobId?: string; stage: string }) => void;
  /** The receiver's warnings and errors (receivers that take a `log` option). */
  log?: (level: 'warn' | 'error', message: string) => void;
}

export interface FaultReceiver {
  handler: NodeHandler;
  /** Lets the receiver finish its background store work, where it has any (`close()` of newer receivers). */
  close(): Promise<void>;
}

type MakeReceiver = (
  options: Record<string, unknown>,
) => NodeHandler & { close?: (timeoutMs?: number) => Promise<void> };

/**
 * The one place that builds a receiver: `createReceiver` from `jobhook/express`, or
 * `webhookReceiver` in code older than its rename (the baseline in RELIABILITY.md was
 * measured on such code), with the same options. Adapt it here when the API moves.
 */
export function createFaultReceiver(options: FaultReceiverOptions): FaultReceiver {
  const entry = jobhookExpress as unknown as Record<string, MakeReceiver | undefined>;
  const make = entry.createReceiver ?? entry.webhookReceiver;
  if (make === undefined)
    throw new Error('src/express.ts exports neither createReceiver nor webhookReceiver');
  const log = options.log;
  const handler = make({
    publicKey: options.publicKey,
    store: options.store,
    onEvent: options.onEvent,
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    ...(options.onError !== undefined ? { onError: options.onError } : {}),
    // Counted instead of printed: a fault run would write thousands of lines. Older receivers ignore it.
    ...(log !== undefined
      ? { log: { warn: (m: string) => log('warn', m), error: (m: string) => log('error', m) } }
      : {}),
  });
  return { handler, close: async () => handler.close?.(10_000) };
}

/** What the handler did: completed runs per job, in the order they completed. */
export class HandlerRecords {
  /** Job ids appended when a run completes (the handler's own log). */
  readonly completed: string[] = [];
  readonly runs = new Map<string, number>();
  running = 0;
  started = 0;
  /** Failures the receivers reported through onError, by stage. */
  readonly receiverErrors = new Map<string, number>();
  /** Jobs with a receiver error, by stage (for the analysis of lost or doubled jobs). */
  readonly errorsByJob = new Map<string, string[]>();

  constructor(
    private readonly workMs: (jobId: string) => number,
    private readonly sleep: (ms: number) => Promise<void>,
  ) {}

  /** The application's `onEvent`: a little async work, then the run counts. */
  readonly onEvent = async (_event: JobCompletedEvent, { jobId }: { jobId: string }): Promise<void> => {
    this.running++;
    this.started++;
    try {
      await this.sleep(this.workMs(jobId));
      this.completed.push(jobId);
      this.runs.set(jobId, (this.runs.get(jobId) ?? 0) + 1);
    } finally {
      this.running--;
    }
  };

  /** The receiver's log lines (warn, error), job ids cut out so that they group. */
  readonly log = (level: 'warn' | 'error', message: string): void => {
    const key = `log ${level}: ${message.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '…').slice(0, 90)}`;
    this.receiverErrors.set(key, (this.receiverErrors.get(key) ?? 0) + 1);
  };

  readonly onError = (error: unknown, context: { jobId?: string; stage: string }): void => {
    const e = error as { code?: string; message?: string };
    // The message says which failure it was (store down, or a claim that expired); job ids are cut out so the keys group.
    const why = (e?.message ?? String(error))
      .split(context.jobId ?? '\u0000')
      .join('…')
      .slice(0, 90);
    const key = `${context.stage} ${e?.code ?? 'error'}: ${why}`;
    this.receiverErrors.set(key, (this.receiverErrors.get(key) ?? 0) + 1);
    if (context.jobId !== undefined)
      this.errorsByJob.set(context.jobId, [...(this.errorsByJob.get(context.jobId) ?? []), key]);
  };
}

export interface Instances {
  urls: string[];
  /** Requests the receivers have not answered yet (their work may go on after the sender gave up). */
  unanswered(): number;
  close(): Promise<void>;
}

/** One Express app per handler, each on its own loopback port. */
export async function startInstances(handlers: NodeHandler[]): Promise<Instances> {
  let open = 0;
  const servers: Server[] = [];
  for (const handler of handlers) {
    const app = express();
    app.post(
      '/webhooks/gateway',
      (_req, res, next) => {
        // Counted until the receiver writes its answer, whether or not the client still listens.
        open++;
        const end = res.end.bind(res) as (...args: unknown[]) => typeof res;
        let counted = true;
        res.end = ((...args: unknown[]) => {
          if (counted) {
            counted = false;
            open--;
          }
          return end(...args);
        }) as typeof res.end;
        next();
      },
      handler,
    );
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    // Node closes idle keep-alive sockets after 5 s, and a sender that reuses one at that
    // moment gets ECONNRESET (seen twice in 20,000 deliveries): longer than any backoff
    // here, so the figures hold the receivers' answers, not that race.
    server.keepAliveTimeout = 65_000;
    servers.push(server);
  }
  return {
    urls: servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}/webhooks/gateway`),
    unanswered: () => open,
    close: async () => {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.close(() => resolve());
              s.closeAllConnections();
            }),
        ),
      );
    },
  };
}
