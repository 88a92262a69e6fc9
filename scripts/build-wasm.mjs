#!/usr/bin/env node
// Builds native/canonical.c into WebAssembly and writes it, base64, into
// src/lib/canonical/wasm/canonical-wasm.ts (committed, so building the package
// needs no C toolchain).
//
//   node scripts/build-wasm.mjs           rebuild the committed artifact
//   node scripts/build-wasm.mjs --check   fail (exit 1) when the committed artifact
//                                         differs from a fresh build
//
// Needs clang and wasm-ld (Debian: apt-get install clang lld). Without them the
// build mode keeps the committed artifact and says so; the check mode fails.
// The output is deterministic: no debug info, no names, custom sections dropped.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = 'native/canonical.c';
const TARGET = 'src/lib/canonical/wasm/canonical-wasm.ts';
const CLANG = process.env.CLANG ?? 'clang';

const FLAGS = [
  '--target=wasm32',
  '-O3',
  '-nostdlib',
  '-ffreestanding',
  '-msimd128',
  '-mbulk-memory',
  '-Wall',
  '-Wextra',
  '-Werror',
  '-Wno-unused-parameter',
  '-Wl,--no-entry',
  '-Wl,--strip-all',
  '-Wl,-z,stack-size=65536',
  '-Wl,--initial-memory=1048576',
];

const check = process.argv.includes('--check');

function toolchainProblem() {
  for (const tool of [CLANG, 'wasm-ld']) {
    const r = spawnSync(tool, ['--version'], { encoding: 'utf8' });
    if (r.error || r.status !== 0) return `${tool} not found`;
  }
  return undefined;
}

/** Drops custom sections (id 0): names, producers, target features. */
function stripCustomSections(wasm) {
  const parts = [wasm.subarray(0, 8)];
  let i = 8;
  while (i < wasm.length) {
    const start = i;
    const id = wasm[i++];
    let size = 0;
    let shift = 0;
    for (;;) {
      const b = wasm[i++];
      size |= (b & 0x7f) << shift;
      shift += 7;
      if (b < 0x80) break;
    }
    const end = i + size;
    if (id !== 0) parts.push(wasm.subarray(start, end));
    i = end;
  }
  return Buffer.concat(parts);
}

function build(dir) {
  const out = join(dir, 'canonical.wasm');
  // Relative source path and a fixed working directory keep the command (and so the output) stable.
  const r = spawnSync(CLANG, [...FLAGS, '-o', out, SOURCE], { cwd: ROOT, encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    process.stderr.write(r.stderr ?? '');
    throw new Error(`${CLANG} failed to compile ${SOURCE}${r.error ? `: ${r.error.message}` : ''}`);
  }
  const wasm = stripCustomSections(readFileSync(out));
  return (
    `// Generated from ${SOURCE} by scripts/build-wasm.mjs: do not edit.\n` +
    `// Rebuild with \`node scripts/build-wasm.mjs\` (needs clang and wasm-ld); ${wasm.length} bytes of WebAssembly.\n` +
    `export const CANONICAL_WASM_BASE64 =\n  '${wasm.toString('base64')}';\n`
  );
}

const problem = toolchainProblem();
if (problem !== undefined) {
  if (check) {
    console.error(`check:wasm: cannot rebuild ${TARGET}: ${problem} (install clang and lld).`);
    process.exit(1);
  }
  console.log(`build:wasm: ${problem}; keeping the committed ${TARGET}.`);
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'jobhook-wasm-'));
try {
  const text = build(dir);
  const target = join(ROOT, TARGET);
  if (check) {
    let committed = '';
    try {
      committed = readFileSync(target, 'utf8');
    } catch {
      // missing: reported below
    }
    if (committed !== text) {
      console.error(
        `check:wasm: ${TARGET} does not match a fresh build of ${SOURCE}; run \`node scripts/build-wasm.mjs\` and commit the result.`,
      );
      process.exit(1);
    }
    console.log(`check:wasm: ${relative(ROOT, target)} matches ${SOURCE}.`);
  } else {
    writeFileSync(target, text);
    console.log(`build:wasm: wrote ${TARGET}.`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
