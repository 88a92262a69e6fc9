/**
 * A throwaway `nats-server -js` on a free loopback port with a temporary store
 * directory (file storage survives kill + start), for the JetStream tests. Never the
 * machine's own server on 4222. Debian's `nats-server` package; .ci/run installs it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, type FaultableServer } from '../helpers/servers.js';

export function natsBinary(): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/bin']) {
    if (dir && existsSync(join(dir, 'nats-server'))) return join(dir, 'nats-server');
  }
  return undefined;
}

/** Run, or skip with a notice; under CI=true a missing nats-server fails instead. */
export function natsAvailability(): { skip: false } | { skip: true; reason: string } {
  if (natsBinary() !== undefined) return { skip: false };
  if (process.env.CI === 'true') throw new Error('CI must run the JetStream tests, but nats-server is not installed (Debian: apt-get install nats-server)');
  const reason = 'JetStream tests skipped: nats-server is not installed (Debian: apt-get install nats-server)';
  console.warn(`\n[jobhook] ${reason}\n`);
  return { skip: true, reason };
}

export async function startNats(): Promise<FaultableServer> {
  const bin = natsBinary();
  if (bin === undefined) throw new Error('nats-server is not installed');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'jobhook-nats-'));
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir, '-n', `jobhook-test-${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`nats-server did not start:\n${out}`)), 15_000);
      const read = (c: Buffer) => {
        out += c.toString();
        if (out.includes('Server is ready')) {
          clearTimeout(timer);
          resolve();
        }
      };
      child!.stdout!.on('data', read);
      child!.stderr!.on('data', read);
      child!.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`nats-server exited with ${code}:\n${out}`));
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
    if (child?.pid === undefined || child.exitCode !== null) throw new Error(`nats-server on port ${port} is not running`);
    process.kill(child.pid, name);
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    start,
    stop,
    destroy: async () => {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    kill: stop,
    dir,
  };
}
