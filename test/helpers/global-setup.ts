import type { TestProject } from 'vitest/node';
import { snapshotPostgres, snapshotRedis, type Cleanup } from './cleanup.js';
import { availability, startPostgres, startRedis, type Throwaway } from './servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Redis for the store suites: JOBHOOK_TEST_REDIS_URL or a throwaway server; '' when none can be had. */
    redisUrl: string;
    /** PostgreSQL likewise (JOBHOOK_TEST_DATABASE_URL). */
    databaseUrl: string;
  }
}

/**
 * Starts one throwaway Redis and one PostgreSQL for the whole run when the variables are
 * unset (removed at the end). Servers given by the variables get back, at the end, what
 * they held at the start: the keys and tables the run made are removed (cleanup.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started: Throwaway[] = [];
  const cleanups: Array<{ name: string; cleanup: Cleanup }> = [];
  const pick = async (envName: string, kind: 'redis' | 'postgres'): Promise<string> => {
    const fromEnv = process.env[envName];
    if (fromEnv) {
      const cleanup = kind === 'redis' ? await snapshotRedis(fromEnv) : await snapshotPostgres(fromEnv);
      cleanups.push({ name: envName, cleanup });
      return fromEnv;
    }
    const a = availability(kind);
    if (a.skip) {
      console.warn(`\n[jobhook] ${a.reason}\n`);
      return '';
    }
    const server = kind === 'redis' ? await startRedis() : await startPostgres();
    started.push(server);
    return server.url;
  };
  const [redisUrl, databaseUrl] = await Promise.all([
    pick('JOBHOOK_TEST_REDIS_URL', 'redis'),
    pick('JOBHOOK_TEST_DATABASE_URL', 'postgres'),
  ]);
  project.provide('redisUrl', redisUrl);
  project.provide('databaseUrl', databaseUrl);
  return async () => {
    for (const { name, cleanup } of cleanups) {
      const { removed } = await cleanup();
      console.log(`[jobhook] ${name}: removed the ${removed} keys or tables this run made`);
    }
    await Promise.all(started.map((s) => s.destroy()));
  };
}
