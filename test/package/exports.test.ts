/**
 * Each public entry's runtime exports, against a checked-in list: an export added,
 * renamed or dropped shows up here and in review, never by accident.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENTRIES } from '../../entries.mjs';
import { ROOT } from '../helpers/paths.js';

// Every entry of entries.mjs, the one list of them, by the name users import it as.
const entries: Record<string, () => Promise<Record<string, unknown>>> = Object.fromEntries(
  ENTRIES.flatMap(({ subpath, source, edge }) => {
    const name = subpath === '.' ? 'jobhook' : `jobhook/${subpath.slice(2)}`;
    const load = (file: string) => () => import(join(ROOT, file)) as Promise<Record<string, unknown>>;
    return [[name, load(source)], ...(edge === undefined ? [] : [[`${name} (edge build)`, load(edge)]])];
  }),
);

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
