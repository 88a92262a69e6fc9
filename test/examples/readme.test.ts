/**
 * The recipes of the README and of docs/*.md are the example apps the other tests in this
 * folder run: each code block marked `<!-- examples/PATH -->` must equal that file, and
 * every recipe file must have its block (once, on whichever page holds it).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { docs } from '../helpers/docs.js';
import { ROOT } from '../helpers/paths.js';

const blocks = docs().flatMap(({ file, text }) =>
  [...text.matchAll(/<!-- (examples\/[^ ]+) -->\n```[a-z]*\n([\s\S]*?)```/g)].map((m) => ({
    file,
    path: m[1]!,
    code: m[2]!,
  })),
);

const recipes = [
  'examples/quickstart/server.mjs',
  'examples/express/receiver.ts',
  'examples/express/store.ts',
  'examples/express/after-json.ts',
  'examples/express/middleware.ts',
  'examples/nextjs/app/api/webhooks/gateway/route.ts',
  'examples/fastify/server.ts',
  'examples/koa/server.ts',
  'examples/lambda/handler.ts',
  'examples/hono-node/server.ts',
  'examples/observability/server.ts',
  'examples/production/server.ts',
  'examples/workers/worker.js',
  'examples/workers/run.sh',
  'examples/workers/workerd.capnp',
  'examples/workers/wrangler.toml',
];

describe('README and docs/ recipes', () => {
  it('every recipe file has its block, once, in the README or a page of docs/', () => {
    expect(blocks.map((b) => b.path).sort()).toEqual([...recipes].sort());
  });

  it.each(recipes)('%s: its block is the file', (path) => {
    const block = blocks.find((b) => b.path === path);
    expect(block?.code).toBe(readFileSync(join(ROOT, path), 'utf8'));
  });
});
