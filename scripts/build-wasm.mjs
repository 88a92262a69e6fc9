#!/usr/bin/env node
// Builds the WebAssembly modules from native/ and writes each, base64, into a
// TypeScript file (committed, so building the package needs no C toolchain):
//   native/canonical.c -> src/lib/core/canonical/wasm/canonical-wasm.ts  (canonical JSON engine)
//   native/rsa.c       -> src/lib/runtime/crypto/rsa-wasm-module.ts          (RSA public operation)
//
//   node scripts/build-wasm.mjs           rebuild the committed artifacts
//   node scripts/build-wasm.mjs --check   fail (exit 1) when a committed artifact
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
const CLANG = process.env.CLANG ?? 'clang';

const COMMON_FLAGS = [
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
];

const MODULES = [
  {
    source: 'native/canonical.c',
    target: 'src/lib/core/canonical/wasm/canonical-wasm.ts',
    constant: 'CANONICAL_WASM_BASE64',
    flags: ['-Wl,-z,stack-size=65536', '-Wl,--initial-memory=1048576'],
  },
  {
    // Static buffers only (about 31 KiB) and a small stack: one 64 KiB page, never grown.
    source: 'native/rsa.c',
    target: 'src/lib/runtime/crypto/rsa-wasm-module.ts',
    constant: 'RSA_WASM_BASE64',
    flags: ['-Wl,-z,stack-size=8192', '-Wl,--initial-memory=65536', '-Wl,--max-memory=65536'],
  },
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

function build(dir, { source, constant, flags }) {
  const out = join(dir, 'module.wasm');
  // Relative source path and a fixed working directory keep the command (and so the output) stable.
  const r = spawnSync(CLANG, [...COMMON_FLAGS, ...flags, '-o', out, source], { cwd: ROOT, encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    process.stderr.write(r.stderr ?? '');
    throw new Error(`${CLANG} failed to compile ${source}${r.error ? `: ${r.error.message}` : ''}`);
  }
  const wasm = stripCustomSections(readFileSync(out));
  return (
    `// Generated from ${source} by scripts/build-wasm.mjs: do not edit.\n` +
    `// Rebuild with \`node scripts/build-wasm.mjs\` (needs clang and wasm-ld); ${wasm.length} bytes of WebAssembly.\n` +
    // Lines of 100 characters (the built package has no line over 1,000); atob skips the line breaks.
    `export const ${constant} = \`\n${wasm.toString('base64').replace(/.{1,100}/g, '$&\n')}\`;\n`
  );
}

const problem = toolchainProblem();
const targets = MODULES.map((m) => m.target).join(', ');
if (problem !== undefined) {
  if (check) {
    console.error(`check:wasm: cannot rebuild ${targets}: ${problem} (install clang and lld).`);
    process.exit(1);
  }
  console.log(`build:wasm: ${problem}; keeping the committed ${targets}.`);
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'jobhook-wasm-'));
try {
  let stale = 0;
  for (const module of MODULES) {
    const text = build(dir, module);
    const target = join(ROOT, module.target);
    if (check) {
      let committed = '';
      try {
        committed = readFileSync(target, 'utf8');
      } catch {
        // missing: reported below
      }
      if (committed !== text) {
        console.error(
          `check:wasm: ${module.target} does not match a fresh build of ${module.source}; run \`node scripts/build-wasm.mjs\` and commit the result.`,
        );
        stale++;
      } else {
        console.log(`check:wasm: ${relative(ROOT, target)} matches ${module.source}.`);
      }
    } else {
      writeFileSync(target, text);
      console.log(`build:wasm: wrote ${module.target}.`);
    }
  }
  if (stale > 0) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
