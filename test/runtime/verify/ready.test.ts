/**
 * `verifier.ready()`: the WebAssembly canonical engine loads on a later turn of the event
 * loop than `createVerifier`, so a synchronous loop right after it runs the JavaScript
 * engine; awaiting `ready()` first gets the fast one. This file's module state is its own
 * (one process per test file): nothing loaded the engine before these tests.
 */
import { describe, expect, it } from 'vitest';
import { createVerifier } from '../../../src/index.js';
import { createVerifier as createWebVerifier } from '../../../src/web.js';
import { wasmEngine } from '../../../src/lib/core/canonical/wasm/lazy.js';
import { publicPem } from '../../helpers/keys.js';
import { jobId, signed } from '../../helpers/deliveries.js';

describe('ready()', () => {
  it('jobhook: resolves once the WebAssembly engine is loaded; verify works before and after', async () => {
    const verifier = createVerifier({ publicKey: publicPem(2048) });
    // Made, not loaded yet: the load needs a turn of the event loop.
    expect(wasmEngine()).toBeUndefined();
    const id = jobId('ready');
    const { body, headers } = signed(id);
    expect(verifier.verify(body, headers).jobId).toBe(id);
    await verifier.ready();
    expect(wasmEngine()).toBeDefined();
    expect(verifier.verify(body, headers).jobId).toBe(id);
  });

  it('jobhook/web: resolves with the keys imported; rejects as verify does when the key function fails', async () => {
    await expect(createWebVerifier({ publicKey: publicPem(2048) }).ready()).resolves.toBeUndefined();
    // A key function that fails: ready() tells, as verify would.
    const broken = createWebVerifier({
      publicKey: async () => {
        throw new Error('the key store is down');
      },
    });
    await expect(broken.ready()).rejects.toThrow(/the key store is down/);
  });
});
