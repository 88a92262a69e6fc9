/**
 * The layers of ARCHITECTURE.md hold in the code: dependency-cruiser finds no cycle, no
 * import that climbs a layer (type-only included), no import of the tools by the library
 * and no import of the library by the tools but through `jobhook` and the door; the rules
 * do catch each; the document's tables name the layers the rules enforce; the door holds
 * what the tools use and `jobhook` does not export, nothing else.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/paths.js';

const CONFIG = join(ROOT, '.dependency-cruiser.cjs');
const depcruise = join(ROOT, 'node_modules', '.bin', 'depcruise');
const { LAYERS, TOOL_LAYERS, NODE_ENTRY, DOOR } = createRequire(import.meta.url)(CONFIG) as {
  LAYERS: Array<[string, string[]]>;
  TOOL_LAYERS: Array<[string, string[]]>;
  NODE_ENTRY: string;
  DOOR: string;
};

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
    'the rules catch an import up a layer, a type-only one, one between features, a cycle, and imports across the door',
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
          // The tools: past the door, the library reaching for them, the door from the library, a tool layer climbed.
          'src/lib/entries/tools-door.ts': "export { b } from '../stores/b.js';\n",
          'src/index.ts': "export { b } from './lib/stores/b.js';\n",
          'src/tools/deliveries/e.ts': "import { b } from '../../lib/stores/b.js';\nexport const e = b;\n",
          'src/tools/deliveries/f.ts':
            "import { b } from '../../lib/entries/tools-door.js';\nimport { g } from '../cli/g.js';\nexport const f = [b, g];\n",
          'src/tools/cli/g.ts': "import { b } from '../../index.js';\nexport const g = b;\n",
          'src/errors.ts': "export { b } from './lib/stores/b.js';\n",
          'src/tools/check/j.ts': "import { b } from '../../errors.js';\nexport const j = b;\n",
          'src/lib/adapters/h.ts': "import { g } from '../../tools/cli/g.js';\nexport const h = g;\n",
          'src/lib/gateway/i.ts': "import { b } from '../entries/tools-door.js';\nexport const i = b;\n",
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
        expect(found).toContain('tools-through-the-door: src/tools/deliveries/e.ts → src/lib/stores/b.ts');
        expect(found).toContain('library-never-imports-tools: src/lib/adapters/h.ts → src/tools/cli/g.ts');
        expect(found).toContain('door-only-for-tools: src/lib/gateway/i.ts → src/lib/entries/tools-door.ts');
        expect(found).toContain('no-upward-from-deliveries: src/tools/deliveries/f.ts → src/tools/cli/g.ts');
        expect(found).toContain('tools-through-the-door: src/tools/check/j.ts → src/errors.ts');
        // Through the door and the public entries is the way in.
        expect(
          found.filter(
            (v) => /→ src\/(index|lib\/entries\/tools-door)\.ts$/.test(v) && v.includes('src/tools/'),
          ),
        ).toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('ARCHITECTURE.md names the layers and folders the rules enforce, in order, the tools beside the library', () => {
    const doc = readFileSync(join(ROOT, 'ARCHITECTURE.md'), 'utf8');
    /** The rows of the table after `marker`, up to the first line that is not a row. */
    const rows = (marker: string) => {
      const at = doc.indexOf(marker);
      expect(at, marker).toBeGreaterThan(0);
      const table = doc.slice(doc.indexOf('\n|', at) + 1).split(/\n(?!\|)/)[0]!;
      return [...table.matchAll(/^\| (\w+) \| ([^|]+) \|/gm)]
        .map((m) => [m[1]!, [...m[2]!.matchAll(/`([\w-]+)\/`/g)].map((f) => f[1]!)])
        .slice(1);
    };
    expect(rows('<!-- layers')).toEqual(LAYERS);
    expect(rows('<!-- tool layers')).toEqual(TOOL_LAYERS);
    expect(doc).toContain(DOOR);
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

describe('the door between the library and its tools', () => {
  it(
    'holds what the tools import from it, and nothing they could import from jobhook',
    { timeout: 60_000 },
    () => {
      const program = ts.createProgram(
        [NODE_ENTRY, DOOR].map((f) => join(ROOT, f)),
        {
          module: ts.ModuleKind.NodeNext,
          moduleResolution: ts.ModuleResolutionKind.NodeNext,
          strict: true,
          noEmit: true,
        },
      );
      const checker = program.getTypeChecker();
      /** The names `file` exports, values and types, `export *` followed. */
      const exported = (file: string) => {
        const source = program.getSourceFile(join(ROOT, file))!;
        return checker.getExportsOfModule(checker.getSymbolAtLocation(source)!).map((s) => s.name);
      };
      const door = exported(DOOR).sort();
      expect(door.length).toBeGreaterThan(10);
      const jobhook = new Set(exported(NODE_ENTRY));
      expect(jobhook.has('createVerifier') && jobhook.has('DialectName')).toBe(true);
      expect(door.filter((name) => jobhook.has(name))).toEqual([]);

      // Every name the door lets through is imported by a tool.
      const used = new Set<string>();
      const toolsDir = join(ROOT, 'src', 'tools');
      for (const file of readdirSync(toolsDir, { recursive: true, encoding: 'utf8' })) {
        if (!file.endsWith('.ts')) continue;
        const text = readFileSync(join(toolsDir, file), 'utf8');
        for (const m of text.matchAll(
          /import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'[./]*lib\/entries\/tools-door\.js'/g,
        ))
          for (const part of m[1]!.split(','))
            if (part.trim() !== '')
              used.add(
                part
                  .trim()
                  .replace(/^type\s+/, '')
                  .split(/\s+as\s+/)[0]!,
              );
      }
      expect([...used].sort()).toEqual(door);
    },
  );
});
