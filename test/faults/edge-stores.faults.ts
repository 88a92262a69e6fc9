/**
 * Issue 35: the Durable Object store on workerd and the Deno KV store on Deno, with the
 * runtime killed (SIGKILL) mid-handler and started again on the same storage. One receiver
 * (`jobhook/web`'s createReceiver on the store, lease 3 s, takeover grace 1 s) runs inside
 * the runtime (test/runtimes/apps/store-rpc.ts `faultReceiver`); each handler tells its
 * effect to a collector in this process (which no fault touches) and then works 300 ms, so
 * a kill lands between an effect and its completion. A gateway-like sender (3 retries,
 * backoff 1 s doubling) offers the jobs at a fixed rate, 20 % of them sent twice at once;
 * the runtime is killed 5 s after each time it serves again, and started again at once.
 *
 *   npm run test:faults -- edge-stores                   # full: 1,500 jobs per runtime at 30 jobs/s
 *   JOBHOOK_FAULTS=short npm run test:faults -- edge-stores   # 300 jobs per runtime
 *
 * Asserted: 0 jobs answered 2xx whose effect was never applied; 0 jobs lost once the jobs
 * the gateway gave up on (every attempt met the runtime down, or the killed holder's claim
 * within its lease) are sent again after the faults stop, as the reconciler would run them;
 * and every job whose effect was applied twice reported (onError stage `superseded` naming
 * it: the claim that took it over from the killed holder). Figures: .tmp/edge-faults-results.json.
 */
import http from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { ROOT } from '../helpers/paths.js';
import { edgeRuntime, startRuntime, type EdgeRuntime, type RuntimeServer } from '../stores/runtime-stores.js';
import { machineAndGit } from './harness/report.js';
import { decide, GATEWAY_POLICY } from './harness/sender.js';

const mode = process.env.JOBHOOK_FAULTS === 'short' ? 'short' : 'full';
const JOBS = Number(process.env.JOBHOOK_FAULTS_JOBS) || (mode === 'short' ? 300 : 1_500);
const RATE = 30;
const KILL_EVERY_MS = 5_000;
const RECEIVER = { leaseMs: 3_000, takeoverGraceMs: 1_000, workMs: 300 };

interface Told {
  effects: Map<string, number>;
  superseded: Set<string>;
  reports: number;
}

/** The collector: effects and reports the runtime tells, kept here. */
async function collector(): Promise<{ url: string; told: Told; close(): Promise<void> }> {
  const told: Told = { effects: new Map(), superseded: new Set(), reports: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const line = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { jobId?: string; stage?: string };
      if (req.url === '/effect') told.effects.set(line.jobId!, (told.effects.get(line.jobId!) ?? 0) + 1);
      if (req.url === '/report') {
        told.reports++;
        if (line.stage === 'superseded' && line.jobId !== undefined) told.superseded.add(line.jobId);
      }
      res.end('ok');
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    told,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** The answers the sender got, by status and error code (`ERR`: none, the runtime was killed). */
const answers = new Map<string, number>();

/** One attempt: the status, or undefined when no answer came (the runtime was killed). */
function attempt(
  url: string,
  d: { body: string; headers: Record<string, string> },
): Promise<number | undefined> {
  const count = (label: string) => answers.set(label, (answers.get(label) ?? 0) + 1);
  return new Promise((resolve) => {
    const req = http.request(
      `${url}/webhooks/gateway`,
      { method: 'POST', agent: false, headers: d.headers, timeout: GATEWAY_POLICY.timeoutMs },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          count(`${res.statusCode} ${/"(?:code|status)":"(\w+)"/.exec(text)?.[1] ?? ''}`.trim());
          resolve(res.statusCode);
        });
        res.on('error', () => resolve(undefined));
      },
    );
    req.on('error', () => {
      count('ERR');
      resolve(undefined);
    });
    req.on('timeout', () => req.destroy());
    req.end(d.body);
  });
}

/** A delivery under the gateway's policy: its final outcome. */
async function deliver(url: string, d: { body: string; headers: Record<string, string> }): Promise<string> {
  for (let n = 1; ; n++) {
    const status = await attempt(url, d);
    const next = decide(GATEWAY_POLICY, n, status);
    if (next.outcome !== 'retry') return next.outcome;
    await new Promise((r) => setTimeout(r, next.delayMs));
  }
}

async function runCase(name: EdgeRuntime) {
  answers.clear();
  const c = await collector();
  let server: RuntimeServer | undefined;
  let kills = 0;
  let downMs = 0;
  try {
    server = await startRuntime(name, {
      receiver: { ...RECEIVER, publicKey: publicPem(2048), collector: c.url },
    });
    const s = server;
    const t0 = Date.now();
    // Killed KILL_EVERY_MS after it serves again, then started at once (a restart that fails
    // fails the case). Counted from the restart: on a loaded machine a restart can take
    // seconds, and kills at fixed times would leave the runtime almost never up.
    let loading = true;
    const restarts = (async () => {
      for (;;) {
        await new Promise((r) => setTimeout(r, KILL_EVERY_MS));
        if (!loading) return;
        kills++;
        const r0 = Date.now();
        await s.kill();
        await s.start();
        downMs += Date.now() - r0;
      }
    })();
    const ids = Array.from({ length: JOBS }, () => jobId(`edge-${name}`));
    const deliveries = new Map(ids.map((id) => [id, signed(id)]));
    const outcomes: Array<Promise<string>> = [];
    const acknowledged = new Set<string>();
    const send = (id: string) =>
      deliver(s.url, deliveries.get(id)!).then((outcome) => {
        if (outcome === 'delivered') acknowledged.add(id);
        return outcome;
      });
    for (const [k, id] of ids.entries()) {
      outcomes.push(send(id));
      if (k % 5 === 0) outcomes.push(send(id)); // sent twice at once
      await new Promise((r) => setTimeout(r, 1000 / RATE));
    }
    const finals = await Promise.all(outcomes);
    loading = false;
    await restarts;
    const effectless = (id: string) => (c.told.effects.get(id) ?? 0) === 0;
    // Answered 2xx without the effect ever applied: what no fault may cause.
    const acknowledgedNotApplied = ids.filter((id) => acknowledged.has(id) && effectless(id));
    // The jobs the gateway gave up on (every attempt met the runtime down, or the dead
    // holder's claim): sent again once the faults stop, as the reconciler would run them.
    const gaveUpJobs = ids.filter((id) => !acknowledged.has(id));
    const resent = await Promise.all(gaveUpJobs.map(send));
    const lost = ids.filter(effectless);
    const doubled = ids.filter((id) => (c.told.effects.get(id) ?? 0) > 1);
    return {
      runtime: name,
      jobs: JOBS,
      deliveries: outcomes.length,
      kills,
      secondsDown: Math.round(downMs / 100) / 10,
      seconds: Math.round((Date.now() - t0) / 1000),
      delivered: finals.filter((f) => f === 'delivered').length,
      gaveUp: finals.filter((f) => f === 'gave-up').length,
      acknowledgedNotApplied: acknowledgedNotApplied.length,
      resent: resent.length,
      resentDelivered: resent.filter((f) => f === 'delivered').length,
      lost: lost.length,
      doubled: doubled.length,
      reportedDoubles: doubled.filter((id) => c.told.superseded.has(id)).length,
      silentDoubles: doubled.filter((id) => !c.told.superseded.has(id)),
      supersededReports: c.told.superseded.size,
      answers: Object.fromEntries([...answers].sort()),
      lostIds: lost.slice(0, 10),
    };
  } finally {
    await server?.destroy();
    await c.close();
  }
}

describe('edge stores: the runtime killed (SIGKILL) mid-handler and restarted', () => {
  const results: unknown[] = [];
  for (const name of ['workerd', 'Deno'] as const) {
    it.skipIf(!edgeRuntime(name).ok)(`${name}: 0 lost, every double reported`, async () => {
      const r = await runCase(name);
      results.push(r);
      console.log(`[jobhook] edge faults ${name}: ${JSON.stringify(r)}`);
      mkdirSync(join(ROOT, '.tmp'), { recursive: true });
      writeFileSync(
        join(ROOT, '.tmp', 'edge-faults-results.json'),
        JSON.stringify(
          { mode, ...machineAndGit(), config: { RATE, KILL_EVERY_MS, ...RECEIVER }, results },
          null,
          2,
        ),
      );
      expect(r.kills).toBeGreaterThan(0);
      expect({
        acknowledgedNotApplied: r.acknowledgedNotApplied,
        lost: r.lost,
        silentDoubles: r.silentDoubles,
      }).toEqual({ acknowledgedNotApplied: 0, lost: 0, silentDoubles: [] });
    });
  }
});
