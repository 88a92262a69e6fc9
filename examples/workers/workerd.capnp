# worker.js on workerd itself, the runtime `wrangler dev` runs: run.sh bundles it and serves it
# on port 8787, with the key from the environment (jobhook's tests run run.sh as written).
# The Durable Object's SQLite storage is in the directory do-storage, kept across restarts.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .receiver),
    (name = "do-storage", disk = (path = "do-storage", writable = true)),
  ],
  sockets = [(name = "http", address = "*:8787", http = (), service = "main")],
);

const receiver :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "dist/worker.js"),
    (name = "jobhook/rsa.wasm", wasm = embed "dist/rsa.wasm"),
  ],
  compatibilityDate = "2025-09-01",
  durableObjectNamespaces = [
    (className = "JobhookIdempotencyObject", uniqueKey = "gateway-webhooks-jobhook", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "do-storage"),
  bindings = [
    (name = "GATEWAY_PUBLIC_KEY", fromEnvironment = "GATEWAY_PUBLIC_KEY"),
    (name = "JOBHOOK", durableObjectNamespace = "JobhookIdempotencyObject"),
  ],
);
