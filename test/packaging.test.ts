import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { exportsMap } from '../entries.mjs';
import { VERSION } from '../src/lib/base/version.js';
import { ROOT } from './helpers/paths.js';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  exports: Record<string, string | { import: Record<string, string>; require: Record<string, string> }>;
  bin: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  dependencies?: Record<string, string>;
  engines: { node: string };
};

describe('package.json', () => {
  it('the CLI reports the package version', () => {
    expect(VERSION).toBe(pkg.version);
  });

  it('exports are the ones entries.mjs lists (node entries.mjs --write)', () => {
    expect(pkg.exports).toEqual(exportsMap());
  });

  it('lists types first in every subpath and condition, and each points at a source entry', () => {
    for (const [subpath, target] of Object.entries(pkg.exports)) {
      if (typeof target === 'string') continue;
      for (const condition of [target.import, target.require])
        expect(Object.keys(condition)[0]).toBe('types');
      // jobhook/rsa.wasm is a file (the RSA module for Workers, written by scripts/write-rsa-wasm.mjs), not a source entry.
      if (subpath === './rsa.wasm') {
        for (const condition of [target.import, target.require])
          expect(condition.default).toBe('./dist/rsa.wasm');
        continue;
      }
      const name = subpath === '.' ? 'index' : subpath.slice(2);
      expect(existsSync(join(ROOT, 'src', `${name}.ts`)), name).toBe(true);
    }
    expect(pkg.bin.jobhook).toBe('./dist/cli.js');
  });

  it('engines, the README and scripts/test-node-majors.sh state the same Node majors', () => {
    // The script pins the majors it tests besides the CI machine's; engines names the lowest.
    const pinned =
      /^VERSIONS=\(([^)]*)\)$/m
        .exec(readFileSync(join(ROOT, 'scripts', 'test-node-majors.sh'), 'utf8'))?.[1]
        ?.trim()
        .split(/\s+/) ?? [];
    const majors = pinned.map((v) => Number(v.split('.')[0]));
    const lowest = Number(/^>=(\d+)$/.exec(pkg.engines.node)?.[1]);
    expect({
      pinned: pinned.every((v) => /^\d+\.\d+\.\d+$/.test(v)),
      lowestBelowPinned: majors.length > 0 && majors.every((m) => m > lowest),
    }).toEqual({ pinned: true, lowestBelowPinned: true });
    const list = (word: string) => `${majors.slice(0, -1).join(', ')} ${word} ${majors.at(-1)}`;
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = (title: string) =>
      readme.slice(
        readme.indexOf(`\n## ${title}\n`),
        readme.indexOf('\n## ', readme.indexOf(`\n## ${title}\n`) + 1),
      );
    expect(section('In a clone of this repository')).toContain(
      `Node.js ${list('or')} (or ${lowest}, which CI still runs)`,
    );
    expect(section('Install')).toContain(
      `Node.js ${list('and')}, ESM and CommonJS. Node ${lowest} reached end of life`,
    );
    expect(section('Install')).toContain(`\`engines\` says \`${pkg.engines.node}\``);
    // The Tests section (the other majors) is in CONTRIBUTING.md, which the package does not ship.
    const contributing = readFileSync(join(ROOT, 'CONTRIBUTING.md'), 'utf8');
    const tests = contributing.slice(contributing.indexOf('\n## Tests\n'));
    expect(contributing.includes('\n## Tests\n') && tests.replace(/\s+/g, ' ')).toContain(
      `Node ${list('and')}, at the versions pinned in the script`,
    );
  });

  it('has no runtime dependency on the verification path; store clients are optional peers', () => {
    expect(pkg.dependencies ?? {}).toEqual({});
    for (const peer of Object.keys(pkg.peerDependencies ?? {}))
      expect(pkg.peerDependenciesMeta?.[peer]?.optional).toBe(true);
  });

  it('src/ never imports node-forge or the stable-stringify baselines', () => {
    const files = (readdirSync(join(ROOT, 'src'), { recursive: true }) as string[]).filter((f) =>
      f.endsWith('.ts'),
    );
    expect(files.length).toBeGreaterThan(10);
    const hits = files.filter((f) =>
      /from '(node-forge|fast-json-stable-stringify|safe-stable-stringify)'/.test(
        readFileSync(join(ROOT, 'src', f), 'utf8'),
      ),
    );
    expect(hits).toEqual([]);
  });
});
