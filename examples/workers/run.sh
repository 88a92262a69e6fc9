# worker.js on workerd, the runtime `wrangler dev` runs (wrangler users: wrangler.toml, `wrangler dev`),
# in a directory holding worker.js and workerd.capnp, with the gateway's public key in gateway-public.pem:
npm install jobhook
npm install --save-dev esbuild workerd
# Bundle as wrangler does: jobhook/rsa.wasm stays a WebAssembly module of the Worker (esbuild cannot bundle .wasm).
npx esbuild worker.js --bundle --format=esm --conditions=workerd,worker,browser --external:jobhook/rsa.wasm --outfile=dist/worker.js
cp node_modules/jobhook/dist/rsa.wasm dist/rsa.wasm
# The Durable Object's storage (workerd.capnp): a directory that outlives the process.
mkdir -p do-storage
GATEWAY_PUBLIC_KEY="$(cat gateway-public.pem)" npx workerd serve workerd.capnp
