/**
 * The README's recipes are the example apps the other tests in this folder run: each
 * code block marked `<!-- examples/PATH -->` must equal that file, and every recipe
 * file must have its block.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/paths.js';

const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const blocks = [...readme.matchAll(/<!-- (examples\/[^ ]+) -->\n```[a-z]*\n([\s\S]*?)```/g)].map((m) => ({
  path: m[1]!,
  code: m[2]!,
}));

const recipes = [
  'examples/express/receiver.ts',
  'examples/express/after-json.ts',
  'examples/express/middleware.ts',
  'examples/nextjs/app/api/webhooks/gateway/route.ts',
  'examples/fastify/server.ts',
  'examples/koa/server.ts',
  'examples/lambda/handler.ts',
  'examples/hono-node/server.ts',
  'examples/observability/server.ts',
  'examples/workers/worker.js',
  'examples/workers/run.sh',
  'examples/workers/workerd.capnp',
  'examples/workers/wrangler.toml',
];

describe('README recipes', () => {
  it('every recipe file has its block in the README', () => {
    expect(blocks.map((b) => b.path).sort()).toEqual([...recipes].sort());
  });

  it.each(recipes)('%s: the README block is the file', (path) => {
    const block = blocks.find((b) => b.path === path);
    expect(block?.code).toBe(readFileSync(join(ROOT, path), 'utf8'));
  });
});
