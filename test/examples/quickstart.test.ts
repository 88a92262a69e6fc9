/**
 * The README's receiver (examples/quickstart/server.mjs), as someone who ran
 * `npm install jobhook express` runs it: plain `node server.mjs` against the packed
 * package. Genuine → 200 processed, again → 200 duplicate, tampered → 401; SIGTERM → exit 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleApp, expectRecipe, start, type Running } from './harness.js';

describe('examples/quickstart (the README receiver)', () => {
  let dir: string;
  let remove: () => void;
  const running: Running[] = [];
  beforeAll(async () => {
    ({ dir, remove } = await exampleApp('quickstart'));
  }, 15 * 60_000);
  afterAll(async () => {
    await Promise.all(running.map((r) => r.stop()));
    remove?.();
  });

  it('node server.mjs: genuine, duplicate, tampered; SIGTERM ends the process', async () => {
    const server = await start(dir, [process.execPath, 'server.mjs']);
    running.push(server);
    await expectRecipe(`${server.url}/webhooks/gateway`, 'quickstart', expect);
    expect(server.output()).toMatch(/^job quickstart-\S+: success$/m);
    const exit = await server.terminate(20_000);
    expect({ alive: exit.alive, code: exit.code }, server.output()).toEqual({ alive: false, code: 0 });
  });
});
