/**
 * Throwaway Redis and PostgreSQL servers on free loopback ports, from the local
 * binaries, for the store suites and the fault suite. Nothing here touches the
 * machine's own services.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export interface Throwaway {
  url: string;
  /** Stops the server (keeps its data directory). */
  stop(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  /** Stops it and removes everything it wrote. */
  destroy(): Promise<void>;
}

/**
 * A throwaway server the fault suite can freeze and crash. Linux only (signals,
 * /proc). Every call returns once the change has happened.
 */
export interface FaultableServer extends Throwaway {
  /** SIGSTOP every process of the server: connections stay open, nothing is answered until resume(). */
  pause(): Promise<void>;
  /** SIGCONT what pause() stopped. */
  resume(): Promise<void>;
  /**
   * A crash. Redis: SIGKILL (with `appendOnly` the data written so far survives in its
   * directory; without it everything is lost). PostgreSQL: `pg_ctl stop -m immediate`
   * (every process quits at once, no checkpoint; start() runs crash recovery).
   */
  kill(): Promise<void>;
  /** The directory holding its files (Redis with `appendOnly`, PostgreSQL), or undefined. */
  dir: string | undefined;
}

export interface RedisThrowawayOptions {
  /** `appendonly yes` (fsync every second) in a directory of its own, so kill() + start() keeps the data (default false: no persistence). */
  appendOnly?: boolean;
  /** `requirepass`: clients must give this password (the `url` carries none). */
  password?: string;
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

export function redisBinary(): string | undefined {
  return onPath('redis-server');
}

/** Directory of initdb/pg_ctl: on PATH or in Debian's /usr/lib/postgresql/<version>/bin. */
export function postgresBin(): string | undefined {
  const initdb = onPath('initdb');
  if (initdb && onPath('pg_ctl')) return join(initdb, '..');
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(base, versions[0], 'bin');
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A server process that can be started again on the same port and data (`start` after
 * `stop` or `kill`), paused and resumed: `args` are its command line, ready when `ready`
 * appears on its output within `timeoutMs`. `dir` is removed by `destroy`.
 */
export async function serverProcess(o: {
  name: string;
  bin: string;
  args: string[];
  ready: string;
  url: string;
  port: number;
  dir?: string;
  timeoutMs?: number;
}): Promise<FaultableServer> {
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(o.bin, o.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(
        () => reject(new Error(`${o.name} did not start:\n${out}`)),
        o.timeoutMs ?? 10_000,
      );
      const read = (c: Buffer) => {
        out += c.toString();
        if (out.includes(o.ready)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child!.stdout!.on('data', read);
      child!.stderr!.on('data', read);
      child!.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${o.name} exited with ${code}:\n${out}`));
      });
    });
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (c === undefined || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  };
  const signal = async (name: 'SIGSTOP' | 'SIGCONT') => {
    if (child?.pid === undefined || child.exitCode !== null)
      throw new Error(`${o.name} on port ${o.port} is not running`);
    process.kill(child.pid, name);
  };
  await start();
  return {
    url: o.url,
    start,
    stop,
    destroy: async () => {
      await stop();
      if (o.dir !== undefined) await rm(o.dir, { recursive: true, force: true });
    },
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    kill: stop,
    dir: o.dir,
  };
}

export async function startRedis(options: RedisThrowawayOptions = {}): Promise<FaultableServer> {
  const bin = redisBinary();
  if (bin === undefined) throw new Error('redis-server is not installed');
  const port = await freePort();
  const dir = options.appendOnly === true ? mkdtempSync(join(tmpdir(), 'jobhook-redis-')) : undefined;
  const persistence =
    dir === undefined
      ? ['--appendonly', 'no']
      : ['--appendonly', 'yes', '--appendfsync', 'everysec', '--dir', dir];
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    ...persistence,
    '--protected-mode',
    'yes',
    ...(options.password === undefined ? [] : ['--requirepass', options.password]),
  ];
  return serverProcess({
    name: 'redis-server',
    bin,
    args,
    ready: 'Ready to accept connections',
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
  });
}

/** Process ids of `pid`'s children, from /proc. */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(join('/proc', entry, 'stat'), 'utf8');
      // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return found;
}

export interface PostgresThrowawayOptions {
  /** `max_connections` (default the server's, 100). */
  maxConnections?: number;
}

export async function startPostgres(settings: PostgresThrowawayOptions = {}): Promise<FaultableServer> {
  const bin = postgresBin();
  if (bin === undefined) throw new Error('PostgreSQL (initdb, pg_ctl) is not installed');
  const port = await freePort();
  const root = mkdtempSync(join(tmpdir(), 'jobhook-pg-'));
  const data = join(root, 'data');
  // PostgreSQL refuses to run as root: run it as the postgres user then.
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chmodSync(root, 0o755);
    chownSync(root, uid, gid);
  }
  const command = (cmd: string, args: string[]): [string, string[]] => {
    const full = join(bin, cmd);
    return asRoot ? ['runuser', ['-u', 'postgres', '--', full, ...args]] : [full, args];
  };
  // Asynchronous, so that creating, starting and stopping a server while a fault run is
  // under way (the short fault suite runs two cases at a time) does not freeze the event
  // loop of the receivers and senders in this process: a 2 s stall times store calls out.
  const run = async (cmd: string, args: string[]) => {
    const [file, argv] = command(cmd, args);
    await execFileAsync(file, argv);
  };
  await run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -k ${root} -c fsync=off -c full_page_writes=off${settings.maxConnections === undefined ? '' : ` -c max_connections=${settings.maxConnections}`}`;
  const start = async () => {
    await run('pg_ctl', ['start', '-w', '-t', '30', '-D', data, '-l', join(root, 'log'), '-o', options]);
  };
  const stopWith = async (mode: 'fast' | 'immediate') => {
    try {
      // 'fast' ends every connection (an outage for the clients) but keeps committed data;
      // 'immediate' is a crash: no checkpoint, recovery from the WAL on the next start.
      await run('pg_ctl', ['stop', '-w', '-m', mode, '-D', data]);
    } catch {
      // already stopped
    }
  };
  const stop = () => stopWith('fast');
  let paused: number[] = [];
  const postmaster = (): number => {
    const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (!Number.isInteger(pid) || pid <= 0) throw new Error(`PostgreSQL on port ${port} is not running`);
    return pid;
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    destroy: async () => {
      if (paused.length > 0) await resume();
      await stop();
      await sleep(50);
      await rm(root, { recursive: true, force: true });
    },
    // The postmaster first, so that it forks no new backend while its children are stopped.
    pause: async () => {
      const main = postmaster();
      process.kill(main, 'SIGSTOP');
      paused = [main, ...childrenOf(main)];
      for (const pid of paused.slice(1)) process.kill(pid, 'SIGSTOP');
    },
    resume,
    kill: () => stopWith('immediate'),
    dir: root,
  };
  async function resume(): Promise<void> {
    for (const pid of paused.reverse()) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // gone
      }
    }
    paused = [];
  }
}

/**
 * What a store suite should do on this machine: run against `url`, or skip with a
 * notice naming the missing binary. Under CI=true a missing server is an error.
 */
export function availability(
  kind: 'redis' | 'postgres',
  what = 'store tests',
): { skip: false } | { skip: true; reason: string } {
  const missing =
    kind === 'redis'
      ? redisBinary() === undefined
        ? 'redis-server'
        : undefined
      : postgresBin() === undefined
        ? 'initdb/pg_ctl (PostgreSQL)'
        : undefined;
  if (missing === undefined) return { skip: false };
  const hint =
    what === 'store tests'
      ? `set ${kind === 'redis' ? 'JOBHOOK_TEST_REDIS_URL' : 'JOBHOOK_TEST_DATABASE_URL'} or install it`
      : 'install it';
  const reason = `${kind} ${what} skipped: ${missing} is not installed (${hint})`;
  if (process.env.CI === 'true')
    throw new Error(`CI must run the ${kind} ${what}, but ${missing} is not installed`);
  return { skip: true, reason };
}
