/**
 * The layers of ARCHITECTURE.md hold in the code: dependency-cruiser finds no cycle and
 * no import that climbs a layer (type-only included), the rules do catch one, and the
 * document's table names the layers the rules enforce.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/paths.js';

const CONFIG = join(ROOT, '.dependency-cruiser.cjs');
const depcruise = join(ROOT, 'node_modules', '.bin', 'depcruise');
const { LAYERS } = createRequire(import.meta.url)(CONFIG) as { LAYERS: Array<[string, string[]]> };

/** dependency-cruiser's violations for `dir` (its own src/), as `rule: from → to`. */
function violations(cwd: string): string[] {
  const run = spawnSync(depcruise, ['src', '--config', CONFIG, '--output-type', 'json'], {
    cwd,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const result = JSON.parse(run.stdout) as {
    summary: { violations: Array<{ rule: { name: string }; from: string; to: string }> };
  };
  return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
}

describe('layers', () => {
  it('src/ has no cycle and no import up a layer, type-only imports included', { timeout: 120_000 }, () => {
    expect(violations(ROOT)).toEqual([]);
  });

  it(
    'the rules catch an import up a layer, a type-only one, one between features, and a cycle',
    { timeout: 120_000 },
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'jobhook-layers-'));
      try {
        const files: Record<string, string> = {
          'src/lib/base/low.ts': "import type { X } from '../adapters/high.js';\nexport type Y = X;\n",
          'src/lib/adapters/high.ts': 'export type X = number;\n',
          'src/lib/receive/a.ts': "import { b } from '../stores/b.js';\nexport const a = b;\n",
          'src/lib/stores/b.ts': 'export const b = 1;\n',
          'src/lib/jobs/c.ts': "import { d } from './d.js';\nexport const c = () => d;\n",
          'src/lib/jobs/d.ts': "import { c } from './c.js';\nexport const d = () => c;\n",
        };
        for (const [path, text] of Object.entries(files)) {
          mkdirSync(join(dir, path, '..'), { recursive: true });
          writeFileSync(join(dir, path), text);
        }
        writeFileSync(
          join(dir, 'tsconfig.json'),
          JSON.stringify({
            compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true },
          }),
        );
        const found = violations(dir);
        expect(found).toContain('no-upward-from-base: src/lib/base/low.ts → src/lib/adapters/high.ts');
        expect(found).toContain('no-receive-to-other-features: src/lib/receive/a.ts → src/lib/stores/b.ts');
        expect(found.filter((v) => v.startsWith('no-circular: src/lib/jobs/'))).not.toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('ARCHITECTURE.md names the layers and folders the rules enforce, in order', () => {
    const doc = readFileSync(join(ROOT, 'ARCHITECTURE.md'), 'utf8');
    const table = doc.slice(doc.indexOf('<!-- layers'));
    const rows = [...table.matchAll(/^\| (\w+) \| ([^|]+) \|/gm)].map((m) => [
      m[1]!,
      [...m[2]!.matchAll(/`([\w-]+)\/`/g)].map((f) => f[1]!),
    ]);
    expect(rows.slice(1)).toEqual(LAYERS);
  });
});

// The command a newcomer runs by hand prints the same verdict.
it('npx depcruise src --config .dependency-cruiser.cjs passes', { timeout: 120_000 }, () => {
  expect(execFileSync(depcruise, ['src', '--config', CONFIG], { cwd: ROOT, encoding: 'utf8' })).toMatch(
    /no dependency violations found/,
  );
});

describe('small functions', () => {
  it(
    'no function of src/ over 80 lines, at most 6 over 60 (scripts/function-sizes.mjs)',
    { timeout: 60_000 },
    () => {
      const list = (min: number) =>
        execFileSync(process.execPath, [join(ROOT, 'scripts', 'function-sizes.mjs'), String(min)], {
          cwd: ROOT,
          encoding: 'utf8',
        })
          .split('\n')
          .filter((line) => line.includes(' src/'));
      expect(list(80)).toEqual([]);
      expect(list(60).length).toBeLessThanOrEqual(6);
    },
  );
});
