import { sha256Hex } from '../crypto/node.js';
import { parseArgs } from 'node:util';
import { canonicalizeText } from '../canonical/index.js';
import { assertDialect, DIALECTS } from '../canonical/dialects.js';
import { readInput, type CliIo } from './io.js';

export const CANONICALIZE_HELP = `Usage: jobhook canonicalize [--dialect NAME] [--digest] [FILE|-]

Prints the canonical JSON the gateway signs for a body (sorted keys, 2-space
indent), or with --digest the lowercase hex SHA-256 of it.

Options:
  --dialect NAME  ${DIALECTS.join(' | ')} (default orjson)
  --digest        print the SHA-256 hex digest instead of the text
  -h, --help      show this help

Example:
  jobhook canonicalize --dialect python body.json
  curl -s ... | jobhook canonicalize --digest -
`;

export async function canonicalizeCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { dialect: { type: 'string' }, digest: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    io.stdout(CANONICALIZE_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new TypeError('canonicalize takes one FILE (or - for standard input)');
  const dialect = assertDialect(values.dialect ?? 'orjson', '--dialect');
  const body = await readInput(positionals[0], io);
  const text = canonicalizeText(body, { dialect });
  io.stdout(values.digest ? sha256Hex(text) + '\n' : text + '\n');
  return 0;
}
