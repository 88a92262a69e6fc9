/** Kept in step with package.json by test/packaging.test.ts. */
export const VERSION = '0.1.0';
