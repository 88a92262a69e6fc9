/**
 * Throwaway Redis and PostgreSQL servers on free loopback ports, from the local
 * binaries, for the store suites. Nothing here touches the machine's own services.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface Throwaway {
  url: string;
  /** Stops the server (keeps its data directory). */
  stop(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  /** Stops it and removes everything it wrote. */
  destroy(): Promise<void>;
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
  const versions = readdirSync(base).filter((v) => existsSync(join(base, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
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

export async function startRedis(): Promise<Throwaway> {
  const bin = redisBinary();
  if (bin === undefined) throw new Error('redis-server is not installed');
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'yes'], { stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${out}`)), 10_000);
      child!.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child!.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}:\n${out}`));
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
  await start();
  return { url: `redis://127.0.0.1:${port}`, start, stop, destroy: stop };
}

export async function startPostgres(): Promise<Throwaway> {
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
  const run = (cmd: string, args: string[]) => {
    const full = join(bin, cmd);
    return asRoot ? execFileSync('runuser', ['-u', 'postgres', '--', full, ...args], { stdio: 'pipe' }) : execFileSync(full, args, { stdio: 'pipe' });
  };
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -k ${root} -c fsync=off -c full_page_writes=off`;
  const start = async () => {
    run('pg_ctl', ['start', '-w', '-t', '30', '-D', data, '-l', join(root, 'log'), '-o', options]);
  };
  const stop = async () => {
    try {
      // 'fast' ends every connection (an outage for the clients) but keeps committed data.
      run('pg_ctl', ['stop', '-w', '-m', 'fast', '-D', data]);
    } catch {
      // already stopped
    }
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    destroy: async () => {
      await stop();
      await sleep(50);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * What a store suite should do on this machine: run against `url`, or skip with a
 * notice naming the missing binary. Under CI=true a missing server is an error.
 */
export function availability(kind: 'redis' | 'postgres'): { skip: false } | { skip: true; reason: string } {
  const missing = kind === 'redis' ? (redisBinary() === undefined ? 'redis-server' : undefined) : postgresBin() === undefined ? 'initdb/pg_ctl (PostgreSQL)' : undefined;
  if (missing === undefined) return { skip: false };
  const reason = `${kind} store tests skipped: ${missing} is not installed (set ${kind === 'redis' ? 'JOBHOOK_TEST_REDIS_URL' : 'JOBHOOK_TEST_DATABASE_URL'} or install it)`;
  if (process.env.CI === 'true') throw new Error(`CI must run the ${kind} store tests, but ${missing} is not installed`);
  return { skip: true, reason };
}
