# worker.js on workerd itself, the runtime `wrangler dev` runs (jobhook's tests use this file).
# Bundle it as wrangler would (jobhook/rsa.wasm stays a module of its own), then serve with the key in the environment:
#   npx esbuild worker.js --bundle --format=esm --conditions=workerd,worker,browser --external:jobhook/rsa.wasm --outfile=dist/worker.js
#   cp node_modules/jobhook/dist/rsa.wasm dist/rsa.wasm
#   GATEWAY_PUBLIC_KEY="$(cat gateway-public.pem)" npx workerd serve workerd.capnp
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [(name = "main", worker = .receiver)],
  sockets = [(name = "http", address = "*:8787", http = (), service = "main")],
);

const receiver :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "dist/worker.js"),
    (name = "jobhook/rsa.wasm", wasm = embed "dist/rsa.wasm"),
  ],
  compatibilityDate = "2025-09-01",
  bindings = [(name = "GATEWAY_PUBLIC_KEY", fromEnvironment = "GATEWAY_PUBLIC_KEY")],
);
