/**
 * The receiver processes of the receiver-fault suite (issue 18): start them, kill -9
 * and restart them, pause them; the TCP proxy that cuts one receiver's store link;
 * and reading back the fsync'd logs they wrote.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { build } from 'esbuild';
import { ROOT } from '../../helpers/paths.js';

const SCRIPT = join(ROOT, 'test', 'faults', 'harness', 'receiver-process.ts');

/**
 * receiver-process.ts and the library's source bundled into one file (packages left to
 * node_modules), once per suite: a receiver restarted after a kill -9 then listens in
 * about a second on this loaded 2-core machine, where `node --import tsx` took 2 s alone
 * and up to 25 s with six receivers starting at once (it transforms each source file).
 */
export async function bundleReceiver(): Promise<{ file: string; remove(): void }> {
  const dir = join(ROOT, '.tmp');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `faults-receiver-process-${process.pid}.mjs`);
  await build({
    entryPoints: [SCRIPT],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outfile: file,
    logLevel: 'warning',
  });
  return { file, remove: () => rmSync(file, { force: true }) };
}

export interface ReceiverSlot {
  index: number;
  port: number;
  url: string;
  /** The process now serving this slot (undefined while it is down). */
  child: ChildProcess | undefined;
  /** Every log file this slot's processes wrote (one per process). */
  logFiles: string[];
  /** Handlers running now, as the process said over IPC (start without end). */
  running: Set<string>;
  /** Processes started for this slot (1 + restarts). */
  incarnations: number;
  /** The process's stderr, whole. */
  stderr: string[];
}

export interface ReceiverEnv {
  /** The bundled receiver script (`bundleReceiver`). */
  script: string;
  publicKey: string;
  store: 'redis' | 'postgres' | 'sqlite';
  /** Store URL per slot (SQLite: the database file) (a slot behind the proxy gets the proxy's). */
  storeUrls: string[];
  transactional: boolean;
  dir: string;
  /** More environment for every receiver (INBOX, MAX_AGE_S…), and per slot (CLOCK_SKEW_MS). */
  extra?: Record<string, string>;
  perSlot?: Array<Record<string, string>>;
}

/** Starts (or restarts) the process of a slot; resolves when it listens. */
export async function startSlot(slot: ReceiverSlot, env: ReceiverEnv): Promise<void> {
  const logFile = join(env.dir, `receiver-${slot.index}-${slot.incarnations++}.log`);
  slot.logFiles.push(logFile);
  slot.running = new Set();
  const child = spawn(process.execPath, [env.script], {
    env: {
      ...process.env,
      PORT: String(slot.port),
      PUBLIC_KEY: env.publicKey,
      STORE: env.store,
      STORE_URL: env.storeUrls[slot.index]!,
      TRANSACTIONAL: env.transactional ? '1' : '0',
      LOG_FILE: logFile,
      ...env.extra,
      ...env.perSlot?.[slot.index],
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  slot.child = child;
  child.stderr!.on('data', (c: Buffer) => slot.stderr.push(c.toString()));
  const running = slot.running;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`receiver ${slot.index} did not listen within 60 s:\n${slot.stderr.join('')}`)),
      60_000,
    );
    child.on('message', (m: { t: string; job?: string }) => {
      if (m.t === 'listening') {
        clearTimeout(timer);
        resolve();
      } else if (m.t === 'start') running.add(m.job!);
      else if (m.t === 'end') running.delete(m.job!);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(
        new Error(
          `receiver ${slot.index} exited (${code ?? signal}) before it listened:\n${slot.stderr.join('')}`,
        ),
      );
    });
  }).catch((err: unknown) => {
    if (slot.child === child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw err;
  });
}

/** kill -9, and waits until the process is gone. */
export async function killSlot(slot: ReceiverSlot): Promise<void> {
  const child = slot.child;
  slot.child = undefined;
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

export function signalSlot(slot: ReceiverSlot, signal: 'SIGSTOP' | 'SIGCONT'): void {
  if (slot.child?.pid === undefined) throw new Error(`receiver ${slot.index} is not running`);
  process.kill(slot.child.pid, signal);
}

/**
 * A TCP proxy in front of the store for one receiver. `blackhole()` stops forwarding
 * in both directions without closing anything (the sockets are paused, so bytes wait
 * in the kernel's buffers, as behind a link that drops packets and TCP retransmits);
 * connections opened meanwhile are accepted and held. `heal()` lets everything through.
 */
export interface BlackholeProxy {
  url: string;
  blackhole(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startProxy(storeUrl: string): Promise<BlackholeProxy> {
  const address = new URL(storeUrl);
  const target = { host: address.hostname, port: Number(address.port) };
  let holed = false;
  const sockets = new Set<Socket>();
  const held: Array<() => void> = [];
  const pipe = (from: Socket, to: Socket) => {
    from.on('data', (chunk: Buffer) => {
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => {
          if (!holed) from.resume();
        });
      }
    });
    from.on('end', () => to.end());
    from.on('error', () => to.destroy());
    from.on('close', () => {
      to.destroy();
      sockets.delete(from);
    });
  };
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.pause();
    const link = () => {
      const upstream = connect(target.port, target.host);
      sockets.add(upstream);
      upstream.on('error', () => client.destroy());
      pipe(client, upstream);
      pipe(upstream, client);
      if (holed) upstream.pause();
      else client.resume();
    };
    if (holed) held.push(link);
    else link();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address.port = String((server.address() as { port: number }).port);
  return {
    url: address.toString(),
    blackhole() {
      holed = true;
      for (const s of sockets) s.pause();
    },
    heal() {
      holed = false;
      for (const s of sockets) s.resume();
      for (const link of held.splice(0)) link();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface EffectLine {
  at: number;
  jobId: string;
  pid: number;
  fence: number;
  file: string;
}

export interface ReportLine {
  at: number;
  jobId: string;
  stage: string;
  code: string;
  message: string;
  file: string;
}

export interface ProcessLogs {
  effects: EffectLine[];
  reports: ReportLine[];
  /** Receiver log lines (warn, error), job ids cut out, counted. */
  logLines: Map<string, number>;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/** Reads the log files back (a last line cut short by a kill -9 is not an effect: it was not fsync'd). */
export function readLogs(files: string[]): ProcessLogs {
  const out: ProcessLogs = { effects: [], reports: [], logLines: new Map() };
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    const lines = text.split('\n');
    if (!text.endsWith('\n')) lines.pop();
    for (const line of lines) {
      if (line === '') continue;
      const [kind, at, a, b, c, ...rest] = line.split(' ');
      if (kind === 'E')
        out.effects.push({ at: Number(at), jobId: a!, pid: Number(b), fence: Number(c), file });
      else if (kind === 'R')
        out.reports.push({ at: Number(at), jobId: a!, stage: b!, code: c!, message: rest.join(' '), file });
      else if (kind === 'L') {
        const key = `log ${a}: ${[b, c, ...rest].join(' ').replace(UUID, '…').slice(0, 110)}`;
        out.logLines.set(key, (out.logLines.get(key) ?? 0) + 1);
      }
    }
  }
  return out;
}
