// \`jobhook/rsa.wasm\`: the RSA module as a file, for hosts that compile WebAssembly only from
// their bundle (Cloudflare Workers: provideRsaWasmModule from jobhook/web), with its
// declaration. Decoded from the base64 the code embeds (src/lib/runtime/crypto/rsa-wasm-module.ts,
// written by scripts/build-wasm.mjs), so building the package needs no compiler. Run after
// tsup (npm run build), which clears dist/ and its declarations. `--out-dir DIR`: another dist/.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const source = readFileSync(new URL('../src/lib/runtime/crypto/rsa-wasm-module.ts', import.meta.url), 'utf8');
const base64 = /RSA_WASM_BASE64\s*=\s*`([A-Za-z0-9+/=\s]+)`/.exec(source)?.[1]?.replace(/\s/g, '');
if (base64 === undefined)
  throw new Error('write-rsa-wasm: no RSA_WASM_BASE64 in src/lib/runtime/crypto/rsa-wasm-module.ts');
const at = process.argv.indexOf('--out-dir');
const dist = at > 0 ? pathToFileURL(`${process.argv[at + 1]}/`) : new URL('../dist/', import.meta.url);
mkdirSync(dist, { recursive: true });
writeFileSync(new URL('rsa.wasm', dist), Buffer.from(base64, 'base64'));
const types =
  '/** native/rsa.c compiled: give it to provideRsaWasmModule from jobhook/web (Cloudflare Workers). */\ndeclare const rsaWasm: WebAssembly.Module;\n';
writeFileSync(new URL('rsa-wasm.d.ts', dist), `${types}export default rsaWasm;\n`);
writeFileSync(new URL('rsa-wasm.d.cts', dist), `${types}export = rsaWasm;\n`);
