import { assertDialect, getHeader } from '../../lib/entries/tools-door.js';
import {
  createVerifier,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_SIGNATURE_HEADER,
  DIALECTS,
  isWebhookError,
  type Verifier,
} from '../../index.js';
import {
  captureStream,
  DELIVERY_OPTIONS,
  dialectOption,
  loadKeys,
  numberFlag,
  parseFlags,
} from './common.js';
import { escapeControls, jsonText, type CliIo } from './io.js';
import { base64Hint } from './signature-encoding.js';

export const VERIFY_HELP = `Usage: jobhook verify --key FILE [--key FILE ...] [options] [FILE ... | -]

Verifies captured deliveries. Each input may be a capture object
{"headers":{...},"body":"<raw body>"} (or "bodyBase64"), a raw HTTP/1.1 request
dump, a .jsonl file of capture objects, a HAR file, or a bare JSON body with
--signature; gzip, deflate and br bodies are decoded. With no FILE, or -, reads
standard input.

Options:
  --key FILE            the gateway's public key (PEM, DER or JWK); repeat for a rotation
  --signature HEX       signature of a bare JSON body
  --signature-header N  header that carries the signature (default ${DEFAULT_SIGNATURE_HEADER})
  --dialect NAME|auto   ${DIALECTS.join(' | ')} | auto (default: try all)
  --max-age SECONDS     refuse events whose finished_at is older (default: no window,
                        captured deliveries are old by nature)
  --max-body-bytes N    largest body verified (default ${DEFAULT_MAX_BODY_BYTES}, as the verifier's);
                        an input longer than 6 × N + 1 MiB is not read
  --jsonl               read every input as JSON lines of capture objects
  --json                one JSON object per delivery instead of text
  -h, --help            show this help

Output: one line per delivery, "VALID job_id dialect key" or "INVALID code message"
(with a hint when the signature looks like base64: the gateway sends hex), written
as the deliveries are read (a JSONL file of any length is streamed).
Control characters and bidirectional overrides from the input are shown escaped (\\x1b).
Exit: 0 all valid, 1 at least one invalid, 2 usage or I/O error.

Example:
  jobhook verify --key gateway.pem captured/*.json
  jobhook verify --key old.pem --key new.pem --json deliveries.jsonl
  jobhook verify --key gateway.pem --json deliveries.har
`;

export async function verifyCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags('verify', {
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
  const maxBodyBytes = numberFlag(values['max-body-bytes'], '--max-body-bytes', { integer: true });
  const verifier = createVerifier({
    publicKey: keys,
    dialects: dialectOption(values.dialect),
    maxAgeSeconds: numberFlag(values['max-age'], '--max-age') ?? false,
    ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }),
    ...(signatureHeader ? { signatureHeader } : {}),
  });
  const captures = captureStream(positionals, io, {
    jsonl: values.jsonl,
    signature: values.signature,
    signatureHeader,
    maxBodyBytes: maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
  });
  // One result per delivery as it is read (JSONL is streamed), written in blocks of 64 KiB.
  let count = 0;
  let invalid = 0;
  let out = '';
  try {
    for await (const c of captures) {
      const { line, valid } = resultLine(verifier, c, {
        keyPaths,
        json: values.json === true,
        signatureHeader: signatureHeader || DEFAULT_SIGNATURE_HEADER,
      });
      if (!valid) invalid++;
      out += line + '\n';
      if (out.length > 64 * 1024) {
        io.stdout(out);
        out = '';
      }
      count++;
      if (io.isTTY && count % 1000 === 0) io.stderr(`\rverified ${count}`);
    }
  } finally {
    // What was verified is written, also when a later input is unreadable.
    io.stdout(out);
  }
  if (io.isTTY && count >= 1000) io.stderr(`\rverified ${count}/${count}, ${invalid} invalid\n`);
  return invalid > 0 ? 1 : 0;
}

/** One delivery's line: VALID or INVALID, as text or JSON. */
function resultLine(
  verifier: Verifier,
  c: { source: string; index: number; body: string | Uint8Array; headers: Record<string, string> },
  how: { keyPaths: string[]; json: boolean; signatureHeader: string },
): { line: string; valid: boolean } {
  const { source, index } = c;
  try {
    const r = verifier.verify(c.body, c.headers);
    const { dialect, keyIndex, jobId } = r;
    const line = how.json
      ? jsonText({ source, index, valid: true, code: null, dialect, keyIndex, jobId })
      : escapeControls(`VALID ${jobId} ${dialect} ${how.keyPaths[keyIndex]}`);
    return { line, valid: true };
  } catch (err) {
    if (!isWebhookError(err)) throw err;
    const hint =
      err.code === 'SIGNATURE_MALFORMED'
        ? base64Hint(getHeader(c.headers, how.signatureHeader.toLowerCase()))
        : undefined;
    const line = how.json
      ? jsonText({
          source,
          index,
          valid: false,
          code: err.code,
          dialect: null,
          keyIndex: null,
          jobId: null,
          ...(hint === undefined ? {} : { hint }),
        })
      : escapeControls(`INVALID ${err.code} ${err.message}${hint === undefined ? '' : ` (${hint})`}`);
    return { line, valid: false };
  }
}
