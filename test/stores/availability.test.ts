import { afterEach, describe, expect, it } from 'vitest';
import { availability, redisBinary } from '../helpers/servers.js';

describe('store suites on a machine without the server binaries', () => {
  const saved = { PATH: process.env.PATH, CI: process.env.CI };
  afterEach(() => {
    process.env.PATH = saved.PATH;
    if (saved.CI === undefined) delete process.env.CI;
    else process.env.CI = saved.CI;
  });

  it('are skipped with a notice naming the missing binary', () => {
    process.env.PATH = '/nonexistent';
    delete process.env.CI;
    expect(availability('redis')).toEqual({
      skip: true,
      reason:
        'redis store tests skipped: redis-server is not installed (set JOBHOOK_TEST_REDIS_URL or install it)',
    });
  });

  it('fail loudly under CI=true instead', () => {
    process.env.PATH = '/nonexistent';
    process.env.CI = 'true';
    expect(() => availability('redis')).toThrow(
      'CI must run the redis store tests, but redis-server is not installed',
    );
  });

  it.skipIf(redisBinary() === undefined)('run when the binary is there', () => {
    expect(availability('redis')).toEqual({ skip: false });
  });
});
