import { defineConfig } from 'vitest/config';

// The fault suites (test/faults): long, one file at a time, never part of `npm test`.
//   npm run test:faults                        full: 20,000 deliveries per store-fault case (issue 10),
//                                              10,000 jobs per receiver-fault case (issue 18)
//   JOBHOOK_FAULTS=short npm run test:faults   CI: 2,000 deliveries / 400 jobs per case, two cases at a time
export default defineConfig({
  test: {
    include: ['test/faults/**/*.faults.ts'],
    testTimeout: 600_000,
    hookTimeout: 300_000,
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    // Cases run one at a time, except in the short mode, which marks them concurrent: two at a time.
    maxConcurrency: 2,
  },
});
