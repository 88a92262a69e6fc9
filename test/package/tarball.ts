/**
 * The package as users get it: `npm pack` run in a copy of this repository as a fresh
 * clone has it (the files git knows, no dist/), after the JavaScript-only build of
 * `npm run demo`, so the tarball shows that the prepack script builds everything,
 * declarations included. Built once per test run, whichever test file asks first (a
 * lock in the run's scratch directory, test/package/global-setup.ts); the others wait.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { inject } from 'vitest';
import { ROOT } from '../helpers/paths.js';

/** A built tarball and how long it took. */
export interface Packed {
  /** Absolute path of the .tgz file. */
  tarball: string;
  /** Size of the .tgz in bytes. */
  size: number;
  /** Files in the tarball (paths inside `package/`), with their unpacked sizes. */
  files: Array<{ path: string; size: number }>;
  /** Seconds the demo build, then `npm pack` (prepack: the full build), took. */
  seconds: { demoBuild: number; pack: number };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Environment for npm in a child process: without the variables `npm test` set for this run's own script. */
function npmEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^npm_(lifecycle|package|command|node_execpath|execpath)/i.test(k)) env[k] = v;
  return { ...env, NO_COLOR: '1', ...extra };
}

/** Copies the files a fresh clone has (tracked, or new and not ignored), without the tests' own data. */
function cloneInto(dir: string): void {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  for (const file of listed.split('\0')) {
    if (file === '' || /^(test|test-d|fixtures|bench|examples)\//.test(file) || !existsSync(join(ROOT, file)))
      continue;
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(join(ROOT, file), join(dir, file));
  }
  // The build tools (tsup, typescript) as `npm ci` installed them.
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
}

function build(scratch: string): Packed {
  const clone = join(scratch, 'clone');
  mkdirSync(clone);
  cloneInto(clone);
  if (existsSync(join(clone, 'dist'))) throw new Error('the copy has a dist/ already');
  // `npm run demo` builds the JavaScript only: dist/ without declarations.
  let t = performance.now();
  execFileSync(
    process.execPath,
    [join(clone, 'node_modules', 'tsup', 'dist', 'cli-default.js'), '--silent'],
    { cwd: clone, stdio: 'pipe', env: npmEnv({ JOBHOOK_BUILD: 'js' }) },
  );
  const demoBuild = (performance.now() - t) / 1000;
  if (existsSync(join(clone, 'dist', 'index.d.ts')))
    throw new Error('the demo build wrote declarations: the test would not show that prepack builds them');
  t = performance.now();
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', scratch], {
    cwd: clone,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: npmEnv(),
    maxBuffer: 64 * 1024 * 1024,
  });
  const pack = (performance.now() - t) / 1000;
  // The prepack build may print to stdout before npm's JSON, in colour where CI is set
  // (tsup's '\x1b[34mCLI'): the JSON array starts on a line of its own.
  const start = out.search(/^\[\s*$/m);
  if (start < 0) throw new Error(`npm pack printed no JSON:\n${out}`);
  const [info] = JSON.parse(out.slice(start)) as Array<{
    filename: string;
    size: number;
    files: Array<{ path: string; size: number }>;
  }>;
  return {
    tarball: join(scratch, info!.filename),
    size: info!.size,
    files: info!.files,
    seconds: { demoBuild, pack },
  };
}

/** The packed package of this test run (built by the first caller, in about a minute). */
export async function packedTarball(): Promise<Packed> {
  const scratch = inject('packDir');
  const done = join(scratch, 'packed.json');
  let mine = false;
  try {
    mkdirSync(join(scratch, 'lock'));
    mine = true;
  } catch {
    // Another test file is building it.
  }
  if (mine) {
    let result: { packed: Packed } | { error: string };
    try {
      result = { packed: build(scratch) };
    } catch (err) {
      const e = err as Error & { stderr?: Buffer | string; stdout?: Buffer | string };
      result = { error: `${e.message}\n${String(e.stdout ?? '')}\n${String(e.stderr ?? '')}` };
    }
    // Written whole, then renamed: a waiting reader never sees half of it.
    writeFileSync(`${done}.part`, JSON.stringify(result));
    renameSync(`${done}.part`, done);
  }
  for (let waited = 0; !existsSync(done); waited += 250) {
    if (waited > 10 * 60_000) throw new Error('the packed tarball was not ready after 10 minutes');
    await sleep(250);
  }
  const result = JSON.parse(readFileSync(done, 'utf8')) as { packed: Packed } | { error: string };
  if ('error' in result) throw new Error(`npm pack failed: ${result.error}`);
  return result.packed;
}
