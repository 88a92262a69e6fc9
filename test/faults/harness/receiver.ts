/**
 * The receivers under test: real HTTP servers on loopback, one per instance, all
 * sharing one idempotency store (each with its own client or pool), and a handler
 * that records every completed run.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { IdempotencyStore, JobCompletedEvent } from '../../../src/index.js';
import { webhookReceiver, type NodeHandler } from '../../../src/express.js';

export interface FaultReceiverOptions {
  publicKey: string;
  store: IdempotencyStore;
  onEvent: (event: JobCompletedEvent, context: { jobId: string }) => Promise<void>;
  leaseMs?: number;
  /** Failures the receiver reports besides its answer (a completion or release the store refused). */
  onError?: (error: unknown, context: { jobId?: string; stage: string }) => void;
}

/**
 * The one place that builds a receiver. Today `webhookReceiver` from `jobhook/express`;
 * when it becomes `createReceiver` (with a logger, heartbeat defaults…) adapt it here.
 */
export function createFaultReceiver(options: FaultReceiverOptions): NodeHandler {
  return webhookReceiver({
    publicKey: options.publicKey,
    store: options.store,
    onEvent: options.onEvent,
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    ...(options.onError !== undefined ? { onError: options.onError } : {}),
  });
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

  readonly onError = (error: unknown, context: { jobId?: string; stage: string }): void => {
    const e = error as { code?: string; message?: string };
    // The message says which failure it was (store down, or a claim that expired); job ids are cut out so the keys group.
    const why = (e?.message ?? String(error)).split(context.jobId ?? '\u0000').join('…').slice(0, 90);
    const key = `${context.stage} ${e?.code ?? 'error'}: ${why}`;
    this.receiverErrors.set(key, (this.receiverErrors.get(key) ?? 0) + 1);
    if (context.jobId !== undefined) this.errorsByJob.set(context.jobId, [...(this.errorsByJob.get(context.jobId) ?? []), key]);
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
