/**
 * The Bun, Deno and Workers recipes (docs/receiving.md) are the example apps that
 * test/runtimes/matrix.test.ts runs on the real runtimes: each file appears in the README
 * or a page of docs/ as one whole code block, character for character.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { docs } from '../helpers/docs.js';
import { ROOT } from '../helpers/paths.js';

const blocks = docs().flatMap(({ text }) =>
  [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! })),
);

describe('the recipes for Bun, Deno and Cloudflare Workers, in the README or docs/', () => {
  for (const [file, lang] of [
    ['examples/bun/server.ts', 'ts'],
    ['examples/deno/server.ts', 'ts'],
    ['examples/workers/worker.js', 'js'],
    ['examples/workers/wrangler.toml', 'toml'],
  ] as const) {
    it(`${file} is a code block of the README, as it is`, () => {
      const text = readFileSync(join(ROOT, file), 'utf8');
      expect(
        blocks.filter((b) => b.lang === lang && b.text === text),
        `README.md or a page of docs/ should have a \`\`\`${lang} block holding ${file} exactly`,
      ).toHaveLength(1);
    });
  }

  it('no module Worker recipe reads the key from a global (module Workers have it in env)', () => {
    for (const b of blocks.filter((x) => /export default \{[\s\S]*fetch\(/.test(x.text)))
      expect(b.text).toMatch(/publicKey: env\./);
  });
});
