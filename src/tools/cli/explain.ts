import { readFile } from 'node:fs/promises';
import { assertDialect } from '../../lib/entries/tools-door.js';
import { DIALECTS, DEFAULT_MAX_BODY_BYTES, DEFAULT_SIGNATURE_HEADER } from '../../index.js';
import { explainDelivery } from './explain-findings.js';
import { describeCause, formatExplanation } from './explain-text.js';
import type { Capture } from './captures.js';
import { captureStream, DELIVERY_OPTIONS, loadKeys, numberFlag, parseFlags } from './common.js';
import { jsonText, UsageError, type CliIo } from './io.js';

export const EXPLAIN_HELP = `Usage: jobhook explain --key FILE [--key FILE ...] [options] [FILE | -]

Explains why one delivery does (or does not) verify: the signature length against
each key's modulus and whether the key opens the signature at all; whether the
header looks altered; then, only when a key opens it (else no body can match, and
the body is not analysed), per dialect the canonical SHA-256 and whether a key
verifies, and whether the body looks re-serialized (pretty-printed by a logger,
non-ASCII escaped, 1.0 turned into 1, integers beyond 2^53). Bounded by the
verifier's limits (body size, canonical size 4 × that, nesting 1,000). Same inputs
as verify.

Options:
  --key FILE                  public key (PEM, DER or JWK); repeat for a rotation
  --signature HEX             signature of a bare JSON body
  --signature-header NAME     default ${DEFAULT_SIGNATURE_HEADER}
  --expected-canonical FILE   the canonical text the sender signed: show the first differing byte
  --dialect NAME              dialect for that comparison (${DIALECTS.join(', ')}; default: the one that verifies, else orjson)
  --max-body-bytes N          largest body analysed (default ${DEFAULT_MAX_BODY_BYTES}, as the verifier's)
  --index N                   the delivery of a JSONL or HAR input whose index verify --json shows
  --json                      print the findings as JSON
  -h, --help                  show this help

Exit: 0 valid, 1 invalid, 2 usage or I/O error.

Example:
  jobhook explain --key gateway.pem failed-delivery.http
  jobhook explain --key gateway.pem --index 3 session.har
`;

/** The one delivery of the input, or the one at `index` (as `verify --json` numbers them). */
async function oneDelivery(captures: AsyncIterable<Capture>, index: number | undefined): Promise<Capture> {
  let capture: Capture | undefined;
  const indexes: number[] = [];
  for await (const c of captures) {
    if (index !== undefined) {
      if (c.index === index) return c;
      indexes.push(c.index);
      continue;
    }
    if (capture !== undefined)
      throw new UsageError(
        'explain takes one delivery; the input holds more than one: pick one with --index N (verify --json shows each index; verify takes many)',
      );
    capture = c;
  }
  if (index !== undefined)
    throw new UsageError(
      `no delivery with --index ${index} in the input (its deliveries: ${indexes.slice(0, 20).join(', ')}${indexes.length > 20 ? ', …' : ''})`,
    );
  return capture!;
}

export async function explainCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags('explain', {
    args: argv,
    allowPositionals: true,
    options: { ...DELIVERY_OPTIONS, 'expected-canonical': { type: 'string' }, index: { type: 'string' } },
  });
  if (values.help) {
    io.stdout(EXPLAIN_HELP);
    return 0;
  }
  const keyPaths = values.key ?? [];
  const keys = await loadKeys(keyPaths);
  if (positionals.length > 1)
    throw new UsageError('explain takes one delivery (one FILE, or - for standard input)');
  const signatureHeader = values['signature-header'];
  const maxBodyBytes =
    numberFlag(values['max-body-bytes'], '--max-body-bytes', { integer: true }) ?? DEFAULT_MAX_BODY_BYTES;
  const index = numberFlag(values.index, '--index', { min: 0, integer: true });
  const c = await oneDelivery(
    captureStream(positionals, io, { signature: values.signature, signatureHeader, maxBodyBytes }),
    index,
  );
  const expected =
    values['expected-canonical'] === undefined
      ? undefined
      : new Uint8Array(await readFile(values['expected-canonical']));
  const explanation = explainDelivery(c.body, c.headers, keys, {
    maxBodyBytes,
    ...(signatureHeader ? { signatureHeader } : {}),
    ...(expected ? { expectedCanonical: expected } : {}),
    ...(values.dialect ? { dialect: assertDialect(values.dialect, '--dialect') } : {}),
  });
  const json = { ...explanation, causes: explanation.causes.map((c) => ({ ...c, text: describeCause(c) })) };
  io.stdout(values.json ? jsonText(json, 2) + '\n' : formatExplanation(explanation, keyPaths));
  return explanation.valid ? 0 : 1;
}
