import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveries, publicPem } from '../../helpers/keys.js';

// jobhook/web as on Cloudflare Workers without nodejs_compat: no node:crypto behind
// process.getBuiltinModule, and WebAssembly that may not be compiled from bytes
// ("Wasm code generation disallowed by embedder"). It must still verify, with BigInt
// RSA and the JS canonical engine. (Its own file: each test file runs in a fresh
// process, so nothing compiled the modules before the stubs went in.)

const realWebAssembly = globalThis.WebAssembly;
const realGetBuiltinModule = process.getBuiltinModule;
let compileAttempts = 0;

beforeAll(() => {
  const blocked = Object.create(realWebAssembly) as typeof WebAssembly;
  Object.defineProperty(blocked, 'Module', {
    value: function Module() {
      compileAttempts++;
      throw new realWebAssembly.CompileError(
        'WebAssembly.Module(): Wasm code generation disallowed by embedder',
      );
    },
  });
  globalThis.WebAssembly = blocked;
  (process as { getBuiltinModule?: unknown }).getBuiltinModule = undefined;
});

afterAll(() => {
  globalThis.WebAssembly = realWebAssembly;
  process.getBuiltinModule = realGetBuiltinModule;
});

describe('jobhook/web where neither node:crypto nor WebAssembly compilation is allowed', () => {
  it('verifies every fixture delivery, opening with BigInt', async () => {
    const { createVerifier: createWebVerifier } = await import('../../../src/web.js');
    const { prepareWebKey } = await import('../../../src/lib/runtime/crypto/web.js');
    const { builtinCrypto, builtinSha256 } =
      await import('../../../src/lib/runtime/crypto/builtin-crypto.js');
    expect(builtinCrypto()).toBeUndefined();
    expect(builtinSha256()).toBeUndefined();
    const now = () => Date.parse('2026-11-21T10:05:00Z');
    const web = createWebVerifier({ publicKey: [publicPem(3072), publicPem(2048), publicPem(4096)], now });
    for (const d of deliveries()) expect((await web.verify(d.body, d.headers)).jobId).toBe(d.jobId);
    await expect(web.verify('{}', { 'X-Service-Signature': '01'.repeat(256) })).rejects.toMatchObject({
      code: 'SIGNATURE_INVALID',
    });

    const key = prepareWebKey(publicPem(2048));
    expect(key.backend()).toBe('wasm'); // what it will try
    await key.open(new Uint8Array(256).fill(1));
    expect(key.backend()).toBe('bigint'); // what it had to use
    expect(compileAttempts).toBeGreaterThan(0);
  });

  it('given the module compiled by the host (as a Workers bundle imports a .wasm file), it opens with WebAssembly', async () => {
    const { prepareWebKey } = await import('../../../src/lib/runtime/crypto/web.js');
    const { provideRsaWasmModule, rsaWasmBytes } =
      await import('../../../src/lib/runtime/crypto/rsa-wasm.js');
    const { createHash, createPrivateKey, sign } = await import('node:crypto');
    const { privatePem } = await import('../../helpers/keys.js');
    // Not a module of the right shape: refused with a TypeError, nothing changes.
    expect(() =>
      provideRsaWasmModule(new realWebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]))),
    ).toThrow(TypeError);
    provideRsaWasmModule(new realWebAssembly.Module(rsaWasmBytes() as BufferSource));
    const key = prepareWebKey(publicPem(2048));
    const digestHex = createHash('sha256').update('x').digest('hex');
    const sig = new Uint8Array(sign('sha256', Buffer.from(digestHex), createPrivateKey(privatePem(2048))));
    expect(new Uint8Array((await key.open(sig))!)).toEqual(
      new Uint8Array(createHash('sha256').update(digestHex).digest()),
    );
    expect(key.backend()).toBe('wasm');
  });
});
