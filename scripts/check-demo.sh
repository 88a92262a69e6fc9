#!/usr/bin/env bash
# Runs the README's demo command and checks what it printed (used by .ci/run).
set -euo pipefail
out=$(npm run -s demo 2>&1) || { echo "$out"; echo "demo exited non-zero"; exit 1; }
echo "$out"
for want in '1. signed delivery *→ 200 processed' '2. the same delivery again *→ 200 duplicate' '3. tampered delivery *→ 401 SIGNATURE_INVALID' 'handler: job 3f1c2b9e' ': OK$'; do
  grep -Eq -- "$want" <<<"$out" || { echo "demo output lacks: $want"; exit 1; }
done
[ "$(grep -c 'handler: job' <<<"$out")" = 1 ] || { echo "the handler ran more or less than once"; exit 1; }
echo "demo output checked"
