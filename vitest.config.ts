import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts', 'test/package/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    typecheck: { enabled: true, include: ['test-d/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
  },
});
