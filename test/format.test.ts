/**
 * The whole tree is formatted by Prettier (.prettierrc.json; .prettierignore keeps data,
 * documents and generated files as they are): `npm run format` writes it, this checks it.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { ROOT } from './helpers/paths.js';

it('every source file is as Prettier writes it (npm run format)', { timeout: 120_000 }, () => {
  let listed = '';
  try {
    execFileSync(
      process.execPath,
      [join(ROOT, 'node_modules/prettier/bin/prettier.cjs'), '--list-different', '.'],
      {
        cwd: ROOT,
        encoding: 'utf8',
      },
    );
  } catch (err) {
    listed = String((err as { stdout?: string }).stdout ?? err);
  }
  expect(listed.split('\n').filter(Boolean)).toEqual([]);
});
