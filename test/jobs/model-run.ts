/**
 * Runs generated commands against a real store with overlapping operations and checks
 * every reply with the linearizability checker (model-check.ts): holders send claims,
 * renewals, completions and releases without waiting for the replies of the others,
 * and (PostgreSQL `transactional: true`) begin transactions, write rows through them,
 * write the completion inside them, commit them, roll them back, or cut their
 * connection between statements, while their own renewals and other holders' claims
 * run beside them. The clock is the test's (a virtual `now` the stores read) or the
 * servers' own (short leases, real waits: time passes on the servers).
 */
import fc from 'fast-check';
import type pg from 'pg';
import type { IdempotencyStore, StoreTransaction, TransactionalStore } from '../../src/lib/jobs/store.js';
import type { ClaimReply } from '../../src/lib/jobs/model.js';
import { LAPSED_CLAIM_KEEP_MS } from '../../src/lib/jobs/store.js';
import { ModelChecker, type ModelOp, type ModelReply } from './model-check.js';

export const HOLDERS = 3;

export type Cmd =
  | { op: 'claim'; job: number; holder: number; fresh: boolean; lease: number; grace: number; lost: boolean }
  | { op: 'renew'; job: number; holder: number; lease: number }
  | { op: 'complete'; job: number; holder: number; retain: number }
  | { op: 'release'; job: number; holder: number }
  /** A transaction's steps (job and holder pick one of the holders that can take the step). */
  | { op: 'begin'; job: number; holder: number }
  /**
   * The transaction's next step, as the runner takes them: a row written through it (up to
   * `rows`), then the completion inside it, then COMMIT (ROLLBACK after `superseded`);
   * `rollback` and `cut` end it at whatever step it is (`cut`: its connection closed).
   */
  | {
      op: 'tx';
      job: number;
      holder: number;
      how: 'next' | 'rollback' | 'cut';
      rows: number;
      retain: number;
      lease: number;
    }
  /** Wait for the replies in flight (those a lock holds back stay in flight). */
  | { op: 'settle' }
  /** The clock moves on (virtual), or the test waits (servers' clock). */
  | { op: 'advance'; ms: number };

/** Times of one clock: leases, graces, retentions and steps (ms). */
export interface Timing {
  leases: number[];
  graces: number[];
  retains: number[];
  steps: number[];
}

/** Commands for two jobs and HOLDERS holders; `transactional`: with the transaction's steps. */
export function commands(t: Timing, transactional: boolean): fc.Arbitrary<Cmd> {
  const job = fc.nat(1);
  const holder = fc.nat(HOLDERS - 1);
  const base = { job, holder };
  const arbs: Array<{ weight: number; arbitrary: fc.Arbitrary<Cmd> }> = [
    {
      weight: 4,
      arbitrary: fc.record({
        op: fc.constant('claim' as const),
        ...base,
        fresh: fc.boolean(),
        lease: fc.constantFrom(...t.leases),
        grace: fc.constantFrom(...t.graces),
        lost: fc.constantFrom(false, false, false, false, true),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        op: fc.constant('renew' as const),
        ...base,
        lease: fc.constantFrom(...t.leases),
      }),
    },
    {
      weight: transactional ? 1 : 2,
      arbitrary: fc.record({
        op: fc.constant('complete' as const),
        ...base,
        retain: fc.constantFrom(...t.retains),
      }),
    },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('release' as const), ...base }) },
    { weight: 4, arbitrary: fc.constant({ op: 'settle' as const }) },
    {
      weight: 2,
      arbitrary: fc.record({ op: fc.constant('advance' as const), ms: fc.constantFrom(...t.steps) }),
    },
  ];
  if (transactional) {
    arbs.push(
      { weight: 3, arbitrary: fc.record({ op: fc.constant('begin' as const), ...base }) },
      {
        weight: 8,
        arbitrary: fc.record({
          op: fc.constant('tx' as const),
          ...base,
          how: fc.constantFrom(
            ...(['next', 'next', 'next', 'next', 'next', 'next', 'rollback', 'cut'] as const),
          ),
          rows: fc.nat(2),
          retain: fc.constantFrom(...t.retains),
          lease: fc.constantFrom(...t.leases),
        }),
      },
    );
  }
  return fc.oneof(...arbs);
}

interface OpenTx {
  tx: StoreTransaction<pg.PoolClient>;
  job: string;
  /** The claim (token, the store's fencing number) the transaction was begun for. */
  token: string;
  fence: number;
  id: number;
  writes: number;
  /** The completion's reply (undefined: not written yet). */
  completed?: ModelReply;
  ended: boolean;
}

/** One holder of one job: its token, fencing number, transaction, and what it has in flight. */
interface Client {
  token: string;
  fence?: number;
  storeBusy: boolean;
  txBusy: boolean;
  tx?: OpenTx;
}

/** What the runs exercised: replies by operation, and how much overlapped. */
export type Coverage = Map<string, number>;

export function countInto(coverage: Coverage | undefined, key: string): void {
  if (coverage !== undefined) coverage.set(key, (coverage.get(key) ?? 0) + 1);
}

export interface RunEnv {
  coverage?: Coverage;
  store: IdempotencyStore;
  /** PostgreSQL transactional: the pool of the test's own queries and the table of the handler's rows. */
  tx?: { admin: pg.Pool; effects: string };
  /** The virtual clock the store reads (undefined: the servers' clock). */
  clock?: { now: number };
  jobIds: string[];
}

/** Ops in flight at most (the check explores their orders). */
const MAX_IN_FLIGHT = 4;

type Event =
  { kind: 'return'; id: number; reply: ModelReply | undefined; at: number } | { kind: 'never'; id: number };

/** Runs `cmds` on `env.store` and the model; throws (with the history) when a reply is one no order of the model gives. */
export async function runCommands(env: RunEnv, cmds: Cmd[], prefix: string): Promise<ModelChecker> {
  const real = env.clock === undefined;
  /** Candidate times of each op: virtual, the clock values while in flight; real, when sent. */
  const seen = new Map<number, number[]>();
  const sentAt = new Map<number, number>();
  const returnedAt = new Map<number, number>();
  const W = 25;
  const checker = new ModelChecker({
    realTime: real,
    slackMs: real ? 150 : 0,
    times: (id, to) => (real ? [sentAt.get(id)! - W, (returnedAt.get(id) ?? to) + W] : seen.get(id)!),
  });
  const events: Event[] = [];
  const inFlight = new Map<number, Promise<void>>();
  const clients = new Map<string, Client>();
  let tokens = 0;
  let txs = 0;
  let untracked = 0;
  /** Commands a reply calls for, sent at the next step (after the replies back are checked). */
  const followUps: Array<Exclude<Cmd, { op: 'settle' | 'advance' }>> = [];
  /** Transactions' ends that came back: job, the end's id (ids grow as operations are sent). */
  const ended: Array<{ job: string; sent: number; at: number }> = [];
  const client = (job: number, holder: number): Client => {
    const key = `${job}/${holder}`;
    let c = clients.get(key);
    if (c === undefined)
      clients.set(key, (c = { token: `${prefix}-h${holder}-t${tokens++}`, storeBusy: false, txBusy: false }));
    return c;
  };
  const now = () => (real ? Date.now() : env.clock!.now);

  /** Sends `op` to the model and `act` to the store; the reply (`read` of it, undefined: not read) comes back as an event. */
  const send = (
    op: ModelOp,
    act: () => Promise<unknown>,
    read: (r: unknown) => ModelReply | undefined,
    done?: (r: unknown) => void,
  ): Promise<void> => {
    const id = checker.invoke(op);
    const overlapping = inFlight.size;
    seen.set(id, [now()]);
    sentAt.set(id, Date.now());
    const p = act().then(
      (r) => {
        done?.(r);
        returnedAt.set(id, Date.now());
        events.push({ kind: 'return', id, reply: read(r), at: now() });
        const what =
          op.kind === 'store'
            ? op.request.op
            : op.kind === 'txEnd'
              ? `tx ${op.commit ? 'commit' : 'end'}`
              : 'tx complete';
        const reply = typeof r === 'string' ? r : ((r as { status?: string } | undefined)?.status ?? 'ok');
        countInto(env.coverage, `${what} → ${reply}`);
        if (overlapping > 0) countInto(env.coverage, 'sent while others were in flight');
        // Sent before a transaction on the same job ended, answered after that end came back: it waited for the row.
        if (op.kind === 'txEnd') ended.push({ job: op.job, sent: id, at: events.length });
        else if (ended.some((e) => e.job === op.job && e.sent > id))
          countInto(env.coverage, 'answered after a transaction it waited for ended');
      },
      // No reply (a timeout, a cut connection): it may have taken effect, or may still.
      () => void events.push({ kind: 'never', id }),
    );
    const tracked = p.finally(() => inFlight.delete(id));
    inFlight.set(id, tracked);
    return tracked;
  };

  const drainEvents = () => {
    for (const e of events.splice(0)) if (e.kind === 'return') checker.returned(e.id, e.reply, e.at);
  };
  const settle = async (ms: number) => {
    await Promise.race([Promise.all([...inFlight.values()]), new Promise((r) => setTimeout(r, ms))]);
    drainEvents();
  };

  try {
    await drive();
  } catch (err) {
    // Leave nothing open behind a failure (a transaction would hold its rows, and the table).
    for (const c of clients.values())
      if (c.tx !== undefined && !c.tx.ended) await c.tx.tx.rollback().catch(() => undefined);
    await Promise.race([
      Promise.allSettled([...inFlight.values()]),
      new Promise((r) => setTimeout(r, 10_000)),
    ]);
    for (const c of clients.values())
      if (c.tx !== undefined && !c.tx.ended) await c.tx.tx.rollback().catch(() => undefined);
    throw err;
  }
  return checker;

  async function drive(): Promise<void> {
    for (const cmd of cmds) {
      if (cmd.op === 'settle') {
        await settle(real ? 30 : 20);
        continue;
      }
      if (cmd.op === 'advance') {
        if (real) {
          checker.note(`wait ${cmd.ms} ms`);
          await new Promise((r) => setTimeout(r, cmd.ms));
        } else {
          env.clock!.now += cmd.ms;
          checker.note(`clock +${cmd.ms} ms`);
          for (const id of inFlight.keys()) seen.get(id)?.push(env.clock!.now);
        }
        continue;
      }
      // Replies already back are checked first: the checker orders only what is still in flight.
      drainEvents();
      if (followUps.length > 0) {
        for (const f of followUps.splice(0)) issue(f);
        // Time for them to reach the store (and wait for a row lock) before the next command.
        await new Promise((r) => setTimeout(r, 5));
      }
      if (inFlight.size >= MAX_IN_FLIGHT) await settle(real ? 30 : 20);
      if (inFlight.size >= MAX_IN_FLIGHT) continue;
      issue(cmd);
    }
    // End every transaction still open (rolled back), then wait for everything in flight.
    const openTx = () => [...clients.values()].filter((c) => c.tx !== undefined && !c.tx.ended);
    for (let i = 0; i < 200 && (inFlight.size > 0 || openTx().length > 0); i++) {
      for (const c of openTx()) if (!c.txBusy) endTx(c, c.tx!, 'rollback');
      await settle(50);
    }
    drainEvents();
    if (inFlight.size > 0)
      throw new Error(
        `model check: ${inFlight.size} operations never answered\n${checker.history.slice(-40).join('\n')}`,
      );
    if (env.tx !== undefined) {
      const rows = await env.tx.admin.query<{ job_id: string; n: string }>(
        `SELECT job_id, count(*) AS n FROM ${env.tx.effects} WHERE job_id = ANY($1) GROUP BY job_id`,
        [env.jobIds],
      );
      checker.checkEffects(Object.fromEntries(rows.rows.map((r) => [r.job_id, Number(r.n)])), env.jobIds);
    }
  }

  function issue(cmd: Exclude<Cmd, { op: 'settle' | 'advance' }>): void {
    const c = client(cmd.job, cmd.holder);
    const job = env.jobIds[cmd.job]!;
    const fenceArg = c.fence === undefined ? {} : { fence: c.fence };
    const storeOp = (
      request: ModelOp & { kind: 'store' },
      act: () => Promise<unknown>,
      read: (r: unknown) => ModelReply | undefined,
      done?: (r: unknown) => void,
    ) => {
      if (c.storeBusy) return;
      c.storeBusy = true;
      void send(request, act, read, done).finally(() => (c.storeBusy = false));
    };
    switch (cmd.op) {
      case 'claim': {
        if (c.storeBusy) return;
        if (cmd.fresh) {
          if (c.txBusy || (c.tx !== undefined && !c.tx.ended)) return; // a holder with a transaction open keeps its claim
          c.token = `${prefix}-h${cmd.holder}-t${tokens++}`;
          delete c.fence;
        }
        const token = c.token;
        storeOp(
          { kind: 'store', job, request: { op: 'claim', token, leaseMs: cmd.lease, graceMs: cmd.grace } },
          () => env.store.claim(job, { leaseMs: cmd.lease, token, takeoverGraceMs: cmd.grace }),
          (r) => (cmd.lost ? undefined : claimReply(r as ClaimReply)),
          (r) => {
            const reply = r as ClaimReply;
            if (!cmd.lost && reply.status === 'acquired' && c.token === token) c.fence = reply.fence;
          },
        );
        return;
      }
      case 'renew':
        storeOp(
          { kind: 'store', job, request: { op: 'renew', token: c.token, leaseMs: cmd.lease }, ...fenceArg },
          () => env.store.renew!(job, c.token, { leaseMs: cmd.lease, ...fenceArg }),
          (r) => r as string,
        );
        return;
      case 'complete':
        if (c.tx !== undefined && !c.tx.ended) return; // a transactional holder completes inside its transaction
        storeOp(
          {
            kind: 'store',
            job,
            request: { op: 'complete', token: c.token, retainMs: cmd.retain },
            ...fenceArg,
          },
          () => env.store.complete(job, c.token, { retainMs: cmd.retain, ...fenceArg }),
          (r) => r as string,
        );
        return;
      case 'release':
        storeOp(
          { kind: 'store', job, request: { op: 'release', token: c.token, keepMs: LAPSED_CLAIM_KEEP_MS } },
          async () => ((await env.store.release(job, c.token)) ? 'released' : 'not_held'),
          (r) => r as string,
        );
        return;
      default: {
        // A transaction's step goes to a holder that can take it (the `pick`-th of them), so that they meet.
        const able = [...clients.entries()].filter(
          ([, x]) =>
            !x.txBusy &&
            (cmd.op === 'begin'
              ? x.fence !== undefined && (x.tx === undefined || x.tx.ended)
              : x.tx !== undefined && !x.tx.ended),
        );
        const chosen = able[(cmd.job * HOLDERS + cmd.holder) % Math.max(1, able.length)];
        if (chosen !== undefined) txStep(chosen[1], env.jobIds[Number(chosen[0].split('/')[0])]!, cmd);
      }
    }
  }

  /** A step of `c`'s transaction that is not a model operation, in flight until `p` settles. */
  function track(p: Promise<void>, c: Client): void {
    c.txBusy = true;
    const id = -1 - untracked++;
    inFlight.set(
      id,
      p.finally(() => {
        c.txBusy = false;
        inFlight.delete(id);
      }),
    );
  }

  /** A transaction's step: begin, a row written through it, its completion, its end. */
  function txStep(c: Client, job: string, cmd: Extract<Cmd, { op: 'begin' | 'tx' }>): void {
    if (env.tx === undefined || c.txBusy) return;
    const open = c.tx !== undefined && !c.tx.ended ? c.tx : undefined;
    if (cmd.op === 'begin') {
      if (open !== undefined || c.fence === undefined) return;
      c.txBusy = true;
      const { fence, token } = { fence: c.fence, token: c.token };
      // Not an operation on the job's record: nothing for the model (tracked so the run waits for it).
      track(
        (env.store as TransactionalStore<pg.PoolClient>).begin(job, token, { fence }).then(
          (tx) => {
            c.tx = { tx, job, token, fence, id: txs++, writes: 0, ended: false };
            countInto(env.coverage, 'tx begun');
          },
          (err: unknown) =>
            countInto(env.coverage, `tx begin failed: ${(err as Error).message.slice(0, 60)}`),
        ),
        c,
      );
      return;
    }
    if (open === undefined) return;
    if (cmd.how !== 'next') return endTx(c, open, cmd.how);
    if (open.completed === undefined && open.writes < cmd.rows) {
      c.txBusy = true;
      track(
        open.tx.client
          .query(`INSERT INTO ${env.tx.effects} (job_id, token) VALUES ($1, $2)`, [job, open.token])
          .then(
            () => void open.writes++,
            () => undefined,
          ),
        c,
      );
      return;
    }
    if (open.completed === undefined) {
      c.txBusy = true;
      // Two times in three the holder's lease renewal fires once the completion holds the
      // row (the runner's heartbeat racing its own commit: it waits for that row).
      const renewAfter =
        cmd.rows >= 1
          ? [...clients.entries()]
              .find(([, x]) => x === c)![0]
              .split('/')
              .map(Number)
          : undefined;
      void send(
        { kind: 'txComplete', job, tx: open.id, token: open.token, fence: open.fence, retainMs: cmd.retain },
        () => open.tx.complete({ retainMs: cmd.retain }),
        (r) => r as string,
        (r) => {
          open.completed = r as string;
          if (renewAfter !== undefined && r === 'completed')
            followUps.push({ op: 'renew', job: renewAfter[0]!, holder: renewAfter[1]!, lease: cmd.lease });
        },
      ).finally(() => (c.txBusy = false));
      return;
    }
    // Committed only after a completion that says completed (as the runner does).
    endTx(c, open, open.completed === 'completed' ? 'commit' : 'rollback');
  }

  function endTx(c: Client, open: OpenTx, how: 'commit' | 'rollback' | 'cut'): void {
    const job = open.job;
    open.ended = true;
    c.txBusy = true;
    const op: ModelOp = { kind: 'txEnd', job, tx: open.id, commit: how === 'commit', writes: open.writes };
    const act = async () => {
      if (how === 'commit') return open.tx.commit();
      if (how === 'rollback') return open.tx.rollback();
      countInto(env.coverage, 'tx cut');
      // Cut: the connection closes between statements; the server rolls the transaction back
      // once it sees it (the op returns when its session is gone).
      const pid = (open.tx.client as unknown as { processID: number }).processID;
      (
        open.tx.client as unknown as { connection: { stream: { destroy(): void } } }
      ).connection.stream.destroy();
      await open.tx.rollback().catch(() => undefined);
      for (let i = 0; i < 500; i++) {
        const r = await env.tx!.admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]);
        if (r.rowCount === 0) return;
        await new Promise((r) => setTimeout(r, 5));
      }
      throw new Error(`session ${pid} still there 2.5 s after its connection was cut`);
    };
    void send(op, act, () => (how === 'commit' ? 'committed' : 'rolled back')).finally(
      () => (c.txBusy = false),
    );
  }
}

function claimReply(r: ClaimReply): ModelReply {
  if (r.status === 'in_progress')
    return {
      status: 'in_progress',
      retryAfterMs: r.retryAfterMs ?? NaN,
      stale: (r as { stale?: boolean }).stale === true,
    };
  if (r.status === 'acquired')
    return { status: 'acquired', token: r.token, fence: r.fence, tookOver: r.tookOver === true };
  return { status: 'completed' };
}
