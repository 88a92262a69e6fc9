import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts', 'test/package/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default in a run is one worker fewer than the cores: one on a 2-core CI
    // machine, the suite then runs file after file (~11 min). Most files wait on servers,
    // child processes, npm and real time rather than compute, so two run side by side.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    typecheck: { enabled: true, include: ['test-d/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
  },
});
