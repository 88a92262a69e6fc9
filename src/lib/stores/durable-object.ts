/**
 * The Durable Object that keeps job records for `DurableObjectIdempotencyStore`
 * (durable-object-store.ts): the class a Worker exports, on SQLite-backed storage. One
 * object holds the jobs of one shard: every request for a job goes to it, it runs one
 * request at a time, and each request is read, `transition` (src/lib/jobs/model.ts) and
 * write with no await between them, in one `transactionSync`, so requests for a job are
 * atomic; the runtime sends the reply only once the write is on disk (the output gate).
 * Leases are time checked on access (the model's `now`); the object's alarm drops records
 * whose time is over (completions past their retention, releases past their keep, claims
 * a day past their lease), so storage holds the jobs of the last retention window.
 */
import { transition, type JobRecord, type JobRequest } from '../jobs/model.js';
import type { JsonObjectValue } from '../core/event.js';
import type { PendingJob } from '../jobs/store.js';
import { recordExpiry } from './record-store.js';

/** The rows a SQL query returns (the part of Cloudflare's `SqlStorageCursor` used here). */
export interface SqlCursorLike {
  toArray(): Array<Record<string, unknown>>;
}

/** The parts of Cloudflare's `DurableObjectState` the object uses. */
export interface DurableObjectStateLike {
  readonly storage: {
    readonly sql?: { exec(query: string, ...bindings: unknown[]): SqlCursorLike };
    transactionSync<T>(run: () => T): T;
    getAlarm(): Promise<number | null>;
    setAlarm(scheduledTime: number): Promise<void>;
  };
}

/** A request to the object (the store's side: durable-object-store.ts). */
export type ObjectRequest =
  | { op: 'apply'; jobId: string; request: JobRequest; now?: number }
  | { op: 'track'; jobId: string; since: number; userParameters?: JsonObjectValue }
  | { op: 'list'; before: number; limit: number }
  | { op: 'forget'; jobId: string }
  | { op: 'defer'; jobId: string; since: number }
  | { op: 'ping' };

const SCHEMA = [
  'CREATE TABLE IF NOT EXISTS jobhook_jobs (job_id TEXT PRIMARY KEY, record TEXT NOT NULL, expires INTEGER NOT NULL)',
  'CREATE INDEX IF NOT EXISTS jobhook_jobs_expires ON jobhook_jobs (expires)',
  'CREATE TABLE IF NOT EXISTS jobhook_pending (job_id TEXT PRIMARY KEY, since INTEGER NOT NULL, params TEXT)',
  'CREATE INDEX IF NOT EXISTS jobhook_pending_since ON jobhook_pending (since, job_id)',
  'CREATE TABLE IF NOT EXISTS jobhook_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)',
];

/**
 * The Durable Object class behind `DurableObjectIdempotencyStore`. Export it from your
 * Worker under the class name your binding names, and declare it in a `new_sqlite_classes`
 * migration (it needs SQLite-backed storage).
 *
 * @example
 * ```js
 * // worker.js
 * export { JobhookIdempotencyObject } from 'jobhook/cloudflare';
 * // wrangler.toml
 * // [[durable_objects.bindings]]
 * // name = "JOBHOOK"
 * // class_name = "JobhookIdempotencyObject"
 * // [[migrations]]
 * // tag = "jobhook-v1"
 * // new_sqlite_classes = ["JobhookIdempotencyObject"]
 * ```
 */
export class JobhookIdempotencyObject {
  private readonly storage: DurableObjectStateLike['storage'];
  private readonly sql: NonNullable<DurableObjectStateLike['storage']['sql']>;
  private lastFence: number;
  /** The alarm as last set or read (undefined: not read yet). */
  private alarmAt: number | null | undefined;

  constructor(state: DurableObjectStateLike, _env?: unknown) {
    const sql = state?.storage?.sql;
    if (sql === undefined)
      throw new TypeError(
        'JobhookIdempotencyObject needs SQLite-backed storage: declare it in a migration with new_sqlite_classes = ["JobhookIdempotencyObject"] (wrangler.toml [[migrations]]), not new_classes',
      );
    this.storage = state.storage;
    this.sql = sql;
    for (const statement of SCHEMA) sql.exec(statement);
    const [row] = sql.exec("SELECT value FROM jobhook_meta WHERE name = 'fence'").toArray();
    this.lastFence = Number(row?.value ?? 0);
  }

  /** One request of the store, as JSON: `{ ok: reply }`, or `{ error }` with status 400 or 500. */
  async fetch(request: Request): Promise<Response> {
    let body: ObjectRequest;
    try {
      body = (await request.json()) as ObjectRequest;
    } catch {
      return Response.json({ error: 'the body is not JSON' }, { status: 400 });
    }
    try {
      const ok = this.storage.transactionSync(() => this.handle(body));
      if (body.op === 'apply') await this.schedule();
      return Response.json({ ok: ok ?? null });
    } catch (err) {
      return Response.json({ error: (err as Error)?.message ?? String(err) }, { status: 500 });
    }
  }

  /** Drops the records whose time is over, then sets the alarm for the next one. */
  async alarm(): Promise<void> {
    this.sql.exec('DELETE FROM jobhook_jobs WHERE expires <= ?', Date.now());
    this.alarmAt = null;
    await this.schedule();
  }

  private handle(body: ObjectRequest): unknown {
    switch (body.op) {
      case 'apply':
        return this.apply(body.jobId, body.request, body.now ?? Date.now());
      case 'track':
        this.sql.exec(
          'INSERT INTO jobhook_pending (job_id, since, params) VALUES (?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET since = excluded.since, params = excluded.params',
          body.jobId,
          body.since,
          body.userParameters === undefined ? null : JSON.stringify(body.userParameters),
        );
        return null;
      case 'list':
        return this.list(body.before, body.limit);
      case 'forget':
        this.sql.exec('DELETE FROM jobhook_pending WHERE job_id = ?', body.jobId);
        return null;
      case 'defer':
        this.sql.exec('UPDATE jobhook_pending SET since = ? WHERE job_id = ?', body.since, body.jobId);
        return null;
      case 'ping':
        return null;
      default:
        throw new TypeError(`unknown request ${JSON.stringify((body as { op?: unknown })?.op)}`);
    }
  }

  private apply(jobId: string, request: JobRequest, now: number): unknown {
    const [row] = this.sql.exec('SELECT record FROM jobhook_jobs WHERE job_id = ?', jobId).toArray();
    const before = row === undefined ? undefined : (JSON.parse(String(row.record)) as JobRecord);
    let fenceTaken = false;
    const fences = () => {
      fenceTaken = true;
      return ++this.lastFence;
    };
    const { record, reply } = transition(before, request, now, fences);
    if (fenceTaken)
      this.sql.exec(
        "INSERT INTO jobhook_meta (name, value) VALUES ('fence', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        this.lastFence,
      );
    if (record === undefined) {
      if (before !== undefined) this.sql.exec('DELETE FROM jobhook_jobs WHERE job_id = ?', jobId);
    } else if (record !== before) {
      this.sql.exec(
        'INSERT INTO jobhook_jobs (job_id, record, expires) VALUES (?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET record = excluded.record, expires = excluded.expires',
        jobId,
        JSON.stringify(record),
        recordExpiry(record),
      );
      if (record.state === 'completed') this.sql.exec('DELETE FROM jobhook_pending WHERE job_id = ?', jobId);
    }
    return reply;
  }

  private list(before: number, limit: number): PendingJob[] {
    const rows = this.sql
      .exec(
        'SELECT job_id, since, params FROM jobhook_pending WHERE since <= ? ORDER BY since, job_id LIMIT ?',
        before,
        limit,
      )
      .toArray();
    return rows.map((r) => ({
      jobId: String(r.job_id),
      since: Number(r.since),
      ...(r.params === null ? {} : { userParameters: JSON.parse(String(r.params)) as JsonObjectValue }),
    }));
  }

  /**
   * Sets the alarm to the earliest record's time unless it is set earlier already (an
   * alarm that finds nothing to drop sets the next one).
   */
  private async schedule(): Promise<void> {
    const [row] = this.sql.exec('SELECT MIN(expires) AS next FROM jobhook_jobs').toArray();
    const next = row?.next === null || row?.next === undefined ? null : Number(row.next);
    if (this.alarmAt === undefined) this.alarmAt = await this.storage.getAlarm();
    if (next === null || (this.alarmAt !== null && this.alarmAt <= next)) return;
    this.alarmAt = next;
    await this.storage.setAlarm(next);
  }
}
