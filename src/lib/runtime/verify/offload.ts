/**
 * Where a verification runs: on the calling thread when its canonical work is cheap, on
 * a worker when it would hold the event loop (placement() in core/verify/cost.ts). The
 * signature is opened here first (one RSA operation: a forged request never takes a
 * worker's time or a place in the queue); the worker parses, canonicalizes and hashes;
 * the main thread then builds the event from a plan of small pieces, yielding between
 * them (pool.ts, loaded by the first costly body with what only it needs).
 */
import { errorDetails, type Logger } from '../../base/log.js';
import type { OpenedSignature, ParsedBody, VerifiedDelivery } from '../../core/verify/core.js';
import { placement } from '../../core/verify/cost.js';
import type { HeadersInput } from '../../core/verify/headers.js';
import type { PublicKeySource } from '../../core/verify/key-list.js';
import type { ResolvedOptions } from '../../core/verify/options.js';
import type { WorkerPool } from './pool.js';
import type { NodeBuiltins, ResolvedWorkers } from './worker-options.js';

/** What a runtime's verifier offers the receivers: open signatures, match small bodies itself. */
export interface LocalVerifier {
  readonly options: ResolvedOptions;
  open(headers: HeadersInput): OpenedSignature | Promise<OpenedSignature>;
  verifyOpened(
    body: string | Uint8Array,
    signature: OpenedSignature,
    parsed?: ParsedBody,
  ): VerifiedDelivery | Promise<VerifiedDelivery>;
}

/** A verified delivery, and the SHA-256 (hex) of its raw body when it was taken on the way (a worker's). */
export interface Verified {
  delivery: VerifiedDelivery;
  rawSha256?: string;
}

/**
 * `verifier.verifyOpened` for cheap bodies, a worker for costly ones. Without worker
 * threads here (`builtins` undefined: an edge runtime) everything is verified on the
 * calling thread. The pool (pool.ts) is loaded by the first costly body.
 */
export class Offloader {
  private pool: WorkerPool | undefined;
  private loading: Promise<WorkerPool> | undefined;
  private closed = false;

  constructor(
    readonly verifier: LocalVerifier,
    private readonly workers: ResolvedWorkers,
    private readonly log: Logger,
    private readonly builtins: NodeBuiltins | undefined,
  ) {}

  /** The first half, on the headers alone (always here: one RSA operation per key); a promise while a key function is resolved. */
  open(headers: HeadersInput): OpenedSignature | Promise<OpenedSignature> {
    return this.verifier.open(headers);
  }

  /**
   * The second half: on this thread for cheap bodies, on a worker for costly ones.
   * `movable`: nobody else holds the body's memory, so it may be moved to the worker
   * rather than copied (a 25 MB copy holds the event loop ~20 ms).
   */
  verifyOpened(
    body: string | Uint8Array,
    signature: OpenedSignature,
    movable = false,
  ): Verified | Promise<Verified> {
    if (this.builtins === undefined) return this.here(body, signature);
    const where = placement(body, this.verifier.options, this.workers.thresholdBytes);
    // The estimate's parse refused it: the same answer, without parsing it again.
    if (!where.worker && where.refused !== undefined) throw where.refused;
    if (!where.worker) return this.here(body, signature, where.parsed);
    return typeof body === 'string'
      ? this.onWorker(new TextEncoder().encode(body), signature, false)
      : this.onWorker(body, signature, movable);
  }

  /** Verifications on a worker now, and waiting for one. */
  busy(): { busy: number; queued: number } {
    return this.pool?.workers() ?? { busy: 0, queued: 0 };
  }

  /** Stops the workers; deliveries still waiting for one are refused (RECEIVER_BUSY). */
  close(): Promise<void> {
    this.closed = true;
    return this.pool?.close() ?? Promise.resolve();
  }

  /** The pool, its module loaded at the first costly body (a pool made after close() is closed: it refuses). */
  private loadPool(builtins: NodeBuiltins): Promise<WorkerPool> {
    this.loading ??= import('./pool.js').then(
      ({ WorkerPool }) => {
        const pool = new WorkerPool(builtins, this.verifier.options, this.workers.poolSize, this.log);
        if (this.closed) void pool.close();
        return (this.pool = pool);
      },
      (err: unknown) => {
        // Tried again by the next costly body, as a failed load of the threads is.
        this.loading = undefined;
        throw err;
      },
    );
    return this.loading;
  }

  private here(
    body: string | Uint8Array,
    signature: OpenedSignature,
    parsed?: ParsedBody,
  ): Verified | Promise<Verified> {
    const delivery = this.verifier.verifyOpened(body, signature, parsed);
    return delivery instanceof Promise ? delivery.then((d) => ({ delivery: d })) : { delivery };
  }

  private async onWorker(body: Uint8Array, signature: OpenedSignature, movable: boolean): Promise<Verified> {
    let pool: WorkerPool;
    try {
      pool = this.pool ?? (await this.loadPool(this.builtins!));
      await pool.load();
    } catch (err) {
      if ((err as { code?: unknown }).code === 'RECEIVER_BUSY') throw err;
      // No worker threads after all (a runtime that names the module but cannot start one): verify here.
      this.log.warn(
        'jobhook: verification workers are unavailable; verifying on the calling thread',
        errorDetails(err),
      );
      return this.here(body, signature);
    }
    return pool.verify(body, signature, movable);
  }
}

/** What differs between runtimes for a receiver: its verifier, its raw hash, its threads. */
export interface VerifyRuntime<K> {
  /** The runtime's verifier of `publicKey`, over options resolved once. */
  verifier(publicKey: PublicKeySource<K>, o: ResolvedOptions): LocalVerifier;
  /** Lowercase hex SHA-256 of raw bytes: how the bytes of a known signature are recognised. */
  hashRaw(bytes: Uint8Array): string | Promise<string>;
  /** How to start worker threads here, or undefined: verify everything on the calling thread. */
  builtins(): NodeBuiltins | undefined;
}
