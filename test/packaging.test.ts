import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VERSION } from '../src/lib/base/version.js';
import { ROOT } from './helpers/paths.js';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  exports: Record<string, string | { import: Record<string, string>; require: Record<string, string> }>;
  bin: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  dependencies?: Record<string, string>;
};

describe('package.json', () => {
  it('the CLI reports the package version', () => {
    expect(VERSION).toBe(pkg.version);
  });

  it('lists types first in every subpath and condition, and each points at a source entry', () => {
    for (const [subpath, target] of Object.entries(pkg.exports)) {
      if (typeof target === 'string') continue;
      for (const condition of [target.import, target.require]) expect(Object.keys(condition)[0]).toBe('types');
      // jobhook/rsa.wasm is a file (the RSA module for Workers, written by scripts/write-rsa-wasm.mjs), not a source entry.
      if (subpath === './rsa.wasm') {
        for (const condition of [target.import, target.require]) expect(condition.default).toBe('./dist/rsa.wasm');
        continue;
      }
      const name = subpath === '.' ? 'index' : subpath.slice(2);
      expect(existsSync(join(ROOT, 'src', `${name}.ts`)), name).toBe(true);
    }
    expect(pkg.bin.jobhook).toBe('./dist/cli.js');
  });

  it('has no runtime dependency on the verification path; store clients are optional peers', () => {
    expect(pkg.dependencies ?? {}).toEqual({});
    for (const peer of Object.keys(pkg.peerDependencies ?? {})) expect(pkg.peerDependenciesMeta?.[peer]?.optional).toBe(true);
  });

  it('src/ never imports node-forge or the stable-stringify baselines', () => {
    const files = (readdirSync(join(ROOT, 'src'), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(10);
    const hits = files.filter((f) => /from '(node-forge|fast-json-stable-stringify|safe-stable-stringify)'/.test(readFileSync(join(ROOT, 'src', f), 'utf8')));
    expect(hits).toEqual([]);
  });
});
