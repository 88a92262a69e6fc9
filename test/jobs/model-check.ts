/**
 * A linearizability check of a store against the claim protocol's model
 * (src/lib/jobs/model.ts `transition`), for commands that overlap: each operation is
 * invoked, may take effect at any moment until its reply comes back (or, with no reply,
 * at any moment after), and the replies seen must be those of some order of the
 * operations the model allows. The checker keeps every model state (a "configuration")
 * that explains what was seen so far; a reply no configuration explains fails the test.
 *
 * Transactions (PostgreSQL `transactional: true`): a completion written inside a
 * transaction is written only while the transaction's token holds the claim with its
 * fencing number (then: the model's completion); it locks the job's row, so every other
 * operation on the job waits until the transaction commits (the completion and the
 * handler's rows become visible at once) or ends otherwise (rolled back, its connection
 * cut: nothing of it stays).
 *
 * Time: each operation takes effect at one of its candidate times (`times`): on a
 * virtual clock, the values the clock had while it was in flight; on the servers' clock,
 * the ends of the interval it was in flight, widened by a tolerance (a record's times are
 * then known to within that tolerance, and a decision that falls inside it may go either
 * way; both are kept).
 */
import {
  current,
  transition,
  type ClaimReply,
  type JobRecord,
  type JobRequest,
} from '../../src/lib/jobs/model.js';

/** What an operation asks of the model. */
export type ModelOp =
  /** A store operation; `fence` (renew, complete): the holder's fencing number as the store gave it. */
  | {
      kind: 'store';
      job: string;
      request: JobRequest extends infer R ? (R extends JobRequest ? Omit<R, 'fence'> : never) : never;
      fence?: number;
    }
  /** A completion written inside transaction `tx`, for the claim `token` holds with `fence` (the store's number). */
  | { kind: 'txComplete'; job: string; tx: number; token: string; fence: number; retainMs: number }
  /** Transaction `tx` ends: committed (its completion and `writes` rows of the handler's become visible) or not. */
  | { kind: 'txEnd'; job: string; tx: number; commit: boolean; writes: number };

export type ModelReply = ClaimReply | string;

interface Config {
  records: Record<string, JobRecord>;
  counter: number;
  /** Model fencing number → the store's, as replies revealed them. */
  fences: Record<number, number>;
  /** Model fencing number → the job it was given for. */
  fenceJobs: Record<number, string>;
  /** Job → the transaction whose completion holds its row. */
  locks: Record<string, number>;
  /** Transaction → the record its completion wrote (visible at commit). */
  written: Record<number, JobRecord>;
  /** Job → the handler rows committed. */
  effects: Record<string, number>;
  /** Operations taken effect whose reply has not been read yet: id → reply. */
  done: Record<number, ModelReply>;
  /** Operations in flight that have not taken effect. */
  pending: number[];
}

export interface CheckerOptions {
  /** Candidate times of operation `id` invoked at `from` (the checker's event count), taking effect by `to`. */
  times(id: number, to: number): number[];
  /**
   * Servers' clock: a decision that is the same at every candidate time keeps one
   * configuration (the record written at the middle time); otherwise each outcome is kept.
   */
  realTime: boolean;
  /** Tolerance for `retryAfterMs` (ms; 0 on a virtual clock). */
  slackMs: number;
}

const MAX_CONFIGS = 2000;

/** The record of `c` without its times (configurations that differ only in those are merged on the servers' clock). */
function shape(r: JobRecord | undefined): string {
  if (r === undefined) return '-';
  return r.state === 'held'
    ? `held ${r.token} ${r.fence} ${r.tookOver} ${r.staleAt !== undefined}`
    : r.state === 'released'
      ? `released ${r.token} ${r.fence} ${r.tainted}`
      : `completed ${r.token} ${r.fence} ${r.superseded === true}`;
}

function replyShape(r: ModelReply): string {
  return typeof r === 'string'
    ? r
    : r.status === 'acquired'
      ? `acquired ${r.fence} ${r.tookOver}`
      : r.status === 'in_progress'
        ? `in_progress ${r.stale}`
        : r.status;
}

export class ModelChecker {
  private configs: Config[] = [
    {
      records: {},
      counter: 0,
      fences: {},
      fenceJobs: {},
      locks: {},
      written: {},
      effects: {},
      done: {},
      pending: [],
    },
  ];
  private readonly ops = new Map<number, ModelOp>();
  private nextId = 0;
  /** What was seen so far, for the failure message. */
  readonly history: string[] = [];

  constructor(private readonly o: CheckerOptions) {}

  /** A note in the history (the clock moved). */
  note(text: string): void {
    this.history.push(text);
  }

  /** An operation is sent: returns its id. */
  invoke(op: ModelOp): number {
    const id = this.nextId++;
    this.ops.set(id, op);
    for (const c of this.configs) c.pending.push(id);
    this.history.push(`#${id} ${JSON.stringify(op)}`);
    return id;
  }

  /**
   * The reply of operation `id` came back (`seen`; undefined: not read, the operation took
   * effect all the same). `now` is the event's time as `times` counts it.
   */
  returned(id: number, seen: ModelReply | undefined, now: number): void {
    this.history.push(`#${id} → ${JSON.stringify(seen ?? '(not read)')}`);
    const out = new Map<string, Config>();
    const visited = new Set<string>();
    const frontier = [...this.configs];
    while (frontier.length > 0) {
      const c = frontier.pop()!;
      if (id in c.done) {
        const next = this.accept(c, id, seen);
        if (next !== undefined) out.set(JSON.stringify(next), next);
        continue;
      }
      for (const p of c.pending) {
        for (const n of this.apply(c, p, now)) {
          const key = JSON.stringify(n);
          if (visited.has(key)) continue;
          visited.add(key);
          frontier.push(n);
        }
      }
      if (visited.size > MAX_CONFIGS * 10)
        throw new Error(`model check: too many interleavings\n${this.trace()}`);
    }
    if (out.size === 0)
      throw new Error(
        `model check: no order of the operations explains the reply of #${id}\n${this.trace()}`,
      );
    this.configs = this.prune([...out.values()]);
  }

  /** Job → committed handler rows, in every configuration left (the store's count must be one of them). */
  effects(): Array<Record<string, number>> {
    return this.configs.map((c) => c.effects);
  }

  /** The store's handler rows per job must be those of a configuration whose pending operations (cut connections) took effect or not. */
  checkEffects(real: Record<string, number>, jobs: string[]): void {
    const norm = (e: Record<string, number>) => jobs.map((j) => e[j] ?? 0).join(',');
    const want = norm(real);
    const candidates = new Set<string>();
    for (const c of this.configs) {
      candidates.add(norm(c.effects));
      // Transactions ended by a cut connection commit nothing: the same counts.
    }
    if (!candidates.has(want))
      throw new Error(
        `model check: handler rows ${want} (jobs ${jobs.join(', ')}), the model has ${[...candidates].join(' or ')}\n${this.trace()}`,
      );
  }

  get size(): number {
    return this.configs.length;
  }

  private trace(): string {
    return `configurations: ${this.configs.length}; last: ${JSON.stringify(this.configs[0])}\nhistory:\n${this.history.slice(-80).join('\n')}`;
  }

  private prune(configs: Config[]): Config[] {
    if (configs.length <= MAX_CONFIGS) return configs;
    throw new Error(`model check: ${configs.length} configurations\n${this.trace()}`);
  }

  /** `c` with operation `id` (taken effect with the reply it gave) read: checked against `seen`. */
  private accept(c: Config, id: number, seen: ModelReply | undefined): Config | undefined {
    const reply = c.done[id]!;
    const next: Config = {
      ...c,
      done: { ...c.done },
      fences: { ...c.fences },
      fenceJobs: { ...c.fenceJobs },
    };
    delete next.done[id];
    if (seen === undefined) return next;
    if (typeof reply === 'string' || typeof seen === 'string') return reply === seen ? next : undefined;
    if (reply.status !== seen.status) return undefined;
    if (reply.status === 'acquired' && seen.status === 'acquired') {
      if (reply.tookOver !== seen.tookOver || reply.token !== seen.token) return undefined;
      return this.mapFence(next, reply.fence, seen.fence, this.ops.get(id)!.job) ? next : undefined;
    }
    if (reply.status === 'in_progress' && seen.status === 'in_progress') {
      if (reply.stale !== seen.stale) return undefined;
      return Math.abs(reply.retryAfterMs - seen.retryAfterMs) <= this.o.slackMs ? next : undefined;
    }
    return next;
  }

  /**
   * Whether the store's `real` fits model number `model` (recorded): the same number for the
   * same model number, a number of its own otherwise, and the order of the numbers `job`'s
   * holders got. Across jobs the order is not checked here: operations in flight together
   * may draw from the counter in one order and take effect in another (PostgreSQL draws
   * before it waits for a row lock); what fencing needs is a larger number for each later
   * holder of the same job.
   */
  private mapFence(c: Config, model: number, real: number, job: string): boolean {
    const known = c.fences[model];
    if (known !== undefined) return known === real;
    for (const [m, r] of Object.entries(c.fences)) {
      if (r === real) return false;
      if (c.fenceJobs[Number(m)] !== job) continue;
      if (Number(m) < model && !(real > r)) return false;
      if (Number(m) > model && !(real < r)) return false;
    }
    c.fences[model] = real;
    c.fenceJobs[model] = job;
    return true;
  }

  /** The model number of the store's fencing number `real` in `c` (undefined: never revealed). */
  private modelFence(c: Config, real: number | undefined): number | undefined {
    if (real === undefined) return undefined;
    for (const [m, r] of Object.entries(c.fences)) if (r === real) return Number(m);
    return undefined;
  }

  /** The configurations after operation `id` takes effect in `c` (none: it cannot yet, its job's row is locked). */
  private apply(c: Config, id: number, now: number): Config[] {
    const op = this.ops.get(id)!;
    // Under the row lock of a transaction's completion (until it ends), an operation on the
    // job takes effect only if it leaves the record as committed: it answers from that
    // version (a claim finding it held, a release or another transaction's completion for
    // a token that does not hold it); one that would change it waits for the lock.
    const locked = c.locks[op.job] !== undefined && op.kind !== 'txEnd';
    const times = this.o.times(id, now);
    const before = JSON.stringify(c.records[op.job] ?? null);
    const outcomes = times.map((t) => this.step(c, id, op, t));
    const valid = outcomes.filter(
      (x): x is Config =>
        x !== undefined &&
        (!locked ||
          (JSON.stringify(x.records[op.job] ?? null) === before && x.locks[op.job] === c.locks[op.job])),
    );
    if (!this.o.realTime || valid.length <= 1) return valid;
    // Servers' clock: one configuration when every candidate time decides alike (the middle one's record).
    const key = (x: Config) =>
      `${shape(x.records[op.job])}|${replyShape(x.done[id]!)}|${JSON.stringify(x.locks)}|${JSON.stringify(x.effects)}`;
    if (new Set(valid.map(key)).size === 1) {
      const mid = this.step(c, id, op, (times[0]! + times[times.length - 1]!) / 2);
      return mid === undefined ? [valid[0]!] : [mid];
    }
    return valid;
  }

  /** Operation `op` taking effect in `c` at `now`. */
  private step(c: Config, id: number, op: ModelOp, now: number): Config | undefined {
    const next: Config = {
      ...c,
      records: { ...c.records },
      locks: { ...c.locks },
      written: { ...c.written },
      effects: { ...c.effects },
      done: { ...c.done },
      pending: c.pending.filter((p) => p !== id),
    };
    let counter = c.counter;
    const fences = () => ++counter;
    const put = (r: JobRecord | undefined) => {
      if (r === undefined) delete next.records[op.job];
      else next.records[op.job] = r;
    };
    if (op.kind === 'store') {
      const fence = this.modelFence(c, op.fence);
      if (op.fence !== undefined && fence === undefined) return undefined; // a number this configuration never gave
      const request = { ...op.request, ...(fence === undefined ? {} : { fence }) } as JobRequest;
      const t = transition(c.records[op.job], request, now, fences);
      put(t.record);
      next.done[id] = t.reply as ModelReply;
    } else if (op.kind === 'txComplete') {
      const fence = this.modelFence(c, op.fence);
      const record = current(c.records[op.job], now);
      if (
        record?.state === 'held' &&
        record.token === op.token &&
        fence !== undefined &&
        record.fence === fence
      ) {
        const t = transition(
          record,
          { op: 'complete', token: op.token, retainMs: op.retainMs, fence },
          now,
          fences,
        );
        next.written[op.tx] = t.record!;
        next.locks[op.job] = op.tx;
        next.done[id] = t.reply as ModelReply;
      } else {
        next.done[id] = 'superseded';
      }
    } else {
      const written = c.written[op.tx];
      delete next.written[op.tx];
      if (next.locks[op.job] === op.tx) delete next.locks[op.job];
      if (op.commit && written !== undefined) {
        put(written);
        next.effects[op.job] = (next.effects[op.job] ?? 0) + op.writes;
      }
      next.done[id] = op.commit ? 'committed' : 'rolled back';
    }
    next.counter = counter;
    return next;
  }
}
