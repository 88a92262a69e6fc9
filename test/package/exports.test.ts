/**
 * Each public entry's runtime exports, against a checked-in list: an export added,
 * renamed or dropped shows up here and in review, never by accident.
 */
import { describe, expect, it } from 'vitest';

const entries = {
  jobhook: () => import('../../src/index.js'),
  'jobhook (edge build)': () => import('../../src/neutral.js'),
  'jobhook/express': () => import('../../src/express.js'),
  'jobhook/web': () => import('../../src/web.js'),
  'jobhook/errors': () => import('../../src/errors.js'),
  'jobhook/gateway': () => import('../../src/gateway.js'),
  'jobhook/store': () => import('../../src/store.js'),
  'jobhook/redis': () => import('../../src/redis.js'),
  'jobhook/postgres': () => import('../../src/postgres.js'),
  'jobhook/testing': () => import('../../src/testing.js'),
  'jobhook/bullmq': () => import('../../src/bullmq.js'),
  'jobhook/nats': () => import('../../src/nats.js'),
};

describe('public exports', () => {
  it('match the checked-in list', async () => {
    const listing: Record<string, string[]> = {};
    for (const [name, load] of Object.entries(entries)) listing[name] = Object.keys(await load()).sort();
    await expect(JSON.stringify(listing, null, 2) + '\n').toMatchFileSnapshot('./exports.snapshot.json');
  });

  it('the edge build offers every name of the Node entry', async () => {
    expect(Object.keys(await import('../../src/neutral.js')).sort()).toEqual(
      Object.keys(await import('../../src/index.js')).sort(),
    );
  });

  it('errors, stores and shared types come from jobhook and its subpaths only: the web entry has its runtime verbs and the RSA module hook for Workers', async () => {
    expect(Object.keys(await import('../../src/web.js')).sort()).toEqual([
      'createReceiver',
      'createVerifier',
      'provideRsaWasmModule',
    ]);
  });

  it('the root entry exports what a receiver needs: at most 60 names, values and types', async () => {
    const { default: ts } = await import('typescript');
    const file = new URL('../../src/index.ts', import.meta.url).pathname;
    const program = ts.createProgram([file], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      skipLibCheck: true,
    });
    const checker = program.getTypeChecker();
    const names = checker
      .getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(file)!)!)
      .map((s) => s.name);
    expect(names.length).toBeLessThanOrEqual(60);
    // What a receiver cannot do without.
    for (const name of [
      'createReceiver',
      'createVerifier',
      'createJobRunner',
      'isWebhookError',
      'WebhookError',
      'JobCompletedEvent',
      'WebhookEventContext',
      'IdempotencyStore',
    ])
      expect(names).toContain(name);
  });
});
