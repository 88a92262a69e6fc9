import { parseArgs } from 'node:util';
import { assertDialect, DIALECTS } from '../canonical/dialects.js';
import { isWebhookError } from '../errors.js';
import { checkNumber } from '../options.js';
import { createNodeVerifier } from '../verify/node-verifier.js';
import { DELIVERY_OPTIONS, dialectOption, loadCaptures, loadKeys } from './common.js';
import type { CliIo } from './io.js';
import { DEFAULT_SIGNATURE_HEADER } from '../protocol.js';

export const VERIFY_HELP = `Usage: jobhook verify --key FILE [--key FILE ...] [options] [FILE ... | -]

Verifies captured deliveries. Each input may be a capture object
{"headers":{...},"body":"<raw body>"} (or "bodyBase64"), a raw HTTP/1.1 request
dump, a .jsonl file of capture objects, or a bare JSON body with --signature.
With no FILE, or -, reads standard input.

Options:
  --key FILE            the gateway's public key (PEM, DER or JWK); repeat for a rotation
  --signature HEX       signature of a bare JSON body
  --signature-header N  header that carries the signature (default ${DEFAULT_SIGNATURE_HEADER})
  --dialect NAME|auto   ${DIALECTS.join(' | ')} | auto (default: try all)
  --max-age SECONDS     refuse events whose finished_at is older (default: no window,
                        captured deliveries are old by nature)
  --jsonl               read every input as JSON lines of capture objects
  --json                one JSON object per delivery instead of text
  -h, --help            show this help

Output: one line per delivery, "VALID job_id dialect key" or "INVALID code message".
Exit: 0 all valid, 1 at least one invalid, 2 usage or I/O error.

Example:
  jobhook verify --key gateway.pem captured/*.json
  jobhook verify --key old.pem --key new.pem --json deliveries.jsonl
`;

export async function verifyCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { ...DELIVERY_OPTIONS, jsonl: { type: 'boolean' }, 'max-age': { type: 'string' } },
  });
  if (values.help) {
    io.stdout(VERIFY_HELP);
    return 0;
  }
  if (values.dialect !== undefined && values.dialect !== 'auto') assertDialect(values.dialect, '--dialect');
  const keyPaths = values.key ?? [];
  const keys = await loadKeys(keyPaths);
  const signatureHeader = values['signature-header'];
  const maxAge = values['max-age'];
  const verifier = createNodeVerifier({
    publicKey: keys,
    dialects: dialectOption(values.dialect),
    maxAgeSeconds: maxAge === undefined ? false : checkNumber(Number.isNaN(Number(maxAge)) ? maxAge : Number(maxAge), '--max-age'),
    ...(signatureHeader ? { signatureHeader } : {}),
  });
  const captures = await loadCaptures(positionals, io, { jsonl: values.jsonl, signature: values.signature, signatureHeader });
  const progress = captures.length > 1000 && io.isTTY;
  let invalid = 0;
  let out = '';
  for (let k = 0; k < captures.length; k++) {
    const c = captures[k]!;
    let line: string;
    try {
      const r = verifier.verify(c.body, c.headers);
      line = values.json
        ? JSON.stringify({ source: c.source, index: c.index, valid: true, code: null, dialect: r.dialect, keyIndex: r.keyIndex, jobId: r.jobId })
        : `VALID ${r.jobId} ${r.dialect} ${keyPaths[r.keyIndex]}`;
    } catch (err) {
      if (!isWebhookError(err)) throw err;
      invalid++;
      line = values.json
        ? JSON.stringify({ source: c.source, index: c.index, valid: false, code: err.code, dialect: null, keyIndex: null, jobId: null })
        : `INVALID ${err.code} ${err.message}`;
    }
    out += line + '\n';
    if (out.length > 64 * 1024) {
      io.stdout(out);
      out = '';
    }
    if (progress && (k + 1) % 1000 === 0) io.stderr(`\rverified ${k + 1}/${captures.length}`);
  }
  io.stdout(out);
  if (progress) io.stderr(`\rverified ${captures.length}/${captures.length}, ${invalid} invalid\n`);
  return invalid > 0 ? 1 : 0;
}
