/**
 * The Node verifier gives each opened signature its key among the signatures in flight and
 * known (made at once with Buffer's hex): the same text `digestKey` makes, so a signature
 * is recognised whichever made its key.
 */
import { describe, expect, it } from 'vitest';
import { digestKey } from '../../../src/lib/receive/guard.js';
import { createNodeVerifier } from '../../../src/lib/runtime/verify/node-verifier.js';
import { jobId, signed } from '../../helpers/deliveries.js';
import { publicPem } from '../../helpers/keys.js';

describe('the Node verifier: an opened signature carries its key', () => {
  it('the same text digestKey makes from what opened, one key or several', async () => {
    for (const publicKey of [publicPem(2048), [publicPem(3072), publicPem(2048)]]) {
      const verifier = createNodeVerifier({ publicKey, maxAgeSeconds: false });
      const opened = await verifier.open(signed(jobId('key')).headers);
      expect(opened.key).toMatch(/^(\d+:[0-9a-f]{64};)+$/);
      const key = opened.key;
      expect(digestKey({ opened: opened.opened })).toBe(key);
    }
  });
});
