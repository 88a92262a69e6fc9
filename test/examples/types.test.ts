/**
 * The Node recipes type-check against the packed package's declarations, as a user's
 * TypeScript project (strict, NodeNext) sees them: what the README shows compiles.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/paths.js';
import { exampleApp } from './harness.js';

let remove: (() => void) | undefined;
afterAll(() => remove?.());

describe('the recipes type-check against the packed declarations', () => {
  it(
    'express, fastify, koa, hono-node, lambda, observability and production (tsc --strict, NodeNext)',
    async () => {
      const app = await exampleApp('express', { name: 'types' });
      remove = app.remove;
      for (const example of ['fastify', 'koa', 'hono-node', 'lambda', 'observability', 'production'])
        cpSync(join(ROOT, 'examples', example), join(app.dir, example), { recursive: true });
      writeFileSync(
        join(app.dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'ES2022',
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            types: ['node'],
          },
          include: ['**/*.ts'],
          exclude: ['node_modules'],
        }),
      );
      let output = '';
      try {
        execFileSync(
          process.execPath,
          [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', app.dir],
          { cwd: app.dir, encoding: 'utf8', stdio: 'pipe' },
        );
      } catch (err) {
        output = String((err as { stdout?: string }).stdout);
      }
      expect(output).toBe('');
    },
    15 * 60_000,
  );
});
