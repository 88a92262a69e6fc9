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
    expect(Object.keys(await import('../../src/neutral.js')).sort()).toEqual(Object.keys(await import('../../src/index.js')).sort());
  });

  it('errors, stores and shared types come from jobhook only: the web entry has its runtime verbs, the RSA module hook for Workers and deprecated aliases', async () => {
    expect(Object.keys(await import('../../src/web.js')).sort()).toEqual(['createReceiver', 'createVerifier', 'createWebVerifier', 'createWebhookHandler', 'provideRsaWasmModule']);
  });
});
