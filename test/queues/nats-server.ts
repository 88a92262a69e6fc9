/**
 * A throwaway `nats-server -js` on a free loopback port with a temporary store
 * directory (file storage survives kill + start), for the JetStream tests. Never the
 * machine's own server on 4222. Debian's `nats-server` package; .ci/run installs it.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, serverProcess, type FaultableServer } from '../helpers/servers.js';

export function natsBinary(): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/bin']) {
    if (dir && existsSync(join(dir, 'nats-server'))) return join(dir, 'nats-server');
  }
  return undefined;
}

/** Run, or skip with a notice; under CI=true a missing nats-server fails instead. */
export function natsAvailability(): { skip: false } | { skip: true; reason: string } {
  if (natsBinary() !== undefined) return { skip: false };
  if (process.env.CI === 'true')
    throw new Error(
      'CI must run the JetStream tests, but nats-server is not installed (Debian: apt-get install nats-server)',
    );
  const reason =
    'JetStream tests skipped: nats-server is not installed (Debian: apt-get install nats-server)';
  console.warn(`\n[jobhook] ${reason}\n`);
  return { skip: true, reason };
}

export async function startNats(): Promise<FaultableServer> {
  const bin = natsBinary();
  if (bin === undefined) throw new Error('nats-server is not installed');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'jobhook-nats-'));
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir, '-n', `jobhook-test-${port}`];
  return serverProcess({
    name: 'nats-server',
    bin,
    args,
    ready: 'Server is ready',
    url: `nats://127.0.0.1:${port}`,
    port,
    dir,
    timeoutMs: 15_000,
  });
}
