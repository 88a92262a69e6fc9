/**
 * The example apps' install (harness.ts installTarball) does not depend on the machine's
 * npm cache. Issue 28: `npm test` failed with `npm install --offline … jobhook-0.1.0.tgz`
 * → ERESOLVE `pg@undefined` in every example suite. npm resolves the package's optional
 * peers and their own peers from the full packuments its cache happens to hold; a cache
 * holding bullmq's (optional peers ioredis and pg, as bullmq 6.7.0 declares)
 * and ioredis's but not pg's fails offline. Here a throwaway registry on loopback serves
 * such a bullmq and an ioredis, `npm view` caches them (as any `npm view` or `npm install`
 * on a shared machine does), and the install runs with that cache set as the user's.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { ROOT } from '../helpers/paths.js';
import { installTarball } from './harness.js';

/** Environment for npm without the variables `npm test` set for this run's own script. */
function npmEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, NO_COLOR: '1', ...extra };
}

describe('installTarball: the example apps install the package whatever the npm cache holds', () => {
  let scratch: string;
  let registry: Server;
  let registryUrl: string;
  let tarball: string;
  let poisoned: string;

  beforeAll(async () => {
    scratch = mkdtempSync(join(inject('packDir'), 'harness-'));
    // A package with jobhook's optional peers (its dist is not needed to show how npm resolves them).
    const own = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      peerDependencies: object;
      peerDependenciesMeta: object;
    };
    const pkg = join(scratch, 'pkg');
    mkdirSync(pkg);
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({
        name: 'jobhook',
        version: '0.0.0-peers',
        peerDependencies: own.peerDependencies,
        peerDependenciesMeta: own.peerDependenciesMeta,
      }),
    );
    const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', scratch], {
      cwd: pkg,
      encoding: 'utf8',
      env: npmEnv({}),
    });
    tarball = join(scratch, (JSON.parse(packed) as Array<{ filename: string }>)[0]!.filename);

    // bullmq and ioredis as the registry describes them (trimmed): bullmq 6.7.0's optional peers include ioredis and pg.
    const versions: Record<string, object> = {
      bullmq: {
        version: '6.7.0',
        peerDependencies: { ioredis: '>=5.0.0', pg: '>=8.0.0' },
        peerDependenciesMeta: { ioredis: { optional: true }, pg: { optional: true } },
      },
      ioredis: { version: '5.11.1' },
    };
    registry = createServer((req, res) => {
      const name = req.url!.slice(1);
      const v = versions[name] as { version: string } | undefined;
      if (v === undefined) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Not found"}');
        return;
      }
      const manifest = {
        name,
        ...v,
        dist: { tarball: `${registryUrl}/${name}/-/${name}-${v.version}.tgz`, shasum: '0'.repeat(40) },
      };
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(
          JSON.stringify({ name, 'dist-tags': { latest: v.version }, versions: { [v.version]: manifest } }),
        );
    });
    await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
    registryUrl = `http://127.0.0.1:${(registry.address() as AddressInfo).port}`;
    poisoned = join(scratch, 'machine-npm-cache');
    // Not execFileSync: the registry answers from this process's event loop.
    for (const name of Object.keys(versions))
      await promisify(execFile)(
        'npm',
        ['view', name, 'version', `--registry=${registryUrl}/`, `--cache=${poisoned}`],
        { env: npmEnv({}) },
      );
    registry.closeAllConnections();
    await new Promise((resolve) => registry.close(resolve));
  });

  it('npm itself, offline with that cache, fails (the premise: if npm stops failing here, this test is moot)', () => {
    const dir = join(scratch, 'plain');
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), '{"name":"plain","private":true}');
    const r = spawnSync(
      'npm',
      [
        'install',
        '--offline',
        `--cache=${poisoned}`,
        `--registry=${registryUrl}/`,
        '--no-audit',
        '--no-fund',
        '--no-package-lock',
        tarball,
      ],
      { cwd: dir, encoding: 'utf8', env: npmEnv({}) },
    );
    expect(
      { status: r.status, eresolve: /ERESOLVE[\s\S]*Found: (ioredis|pg)@undefined/.test(r.stderr) },
      r.stderr,
    ).toEqual({ status: 1, eresolve: true });
  });

  it("installTarball with that cache as the machine's (npm_config_cache, npm_config_registry): installed, no optional peer", () => {
    const dir = join(scratch, 'app');
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), '{"name":"app","private":true}');
    const saved = { cache: process.env.npm_config_cache, registry: process.env.npm_config_registry };
    process.env.npm_config_cache = poisoned;
    process.env.npm_config_registry = `${registryUrl}/`;
    try {
      installTarball(dir, tarball);
    } finally {
      for (const [k, v] of Object.entries({
        npm_config_cache: saved.cache,
        npm_config_registry: saved.registry,
      })) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    const installed = JSON.parse(
      readFileSync(join(dir, 'node_modules', 'jobhook', 'package.json'), 'utf8'),
    ) as { version: string };
    expect({
      version: installed.version,
      pg: existsSync(join(dir, 'node_modules', 'pg')),
      ioredis: existsSync(join(dir, 'node_modules', 'ioredis')),
    }).toEqual({ version: '0.0.0-peers', pg: false, ioredis: false });
  });
});
