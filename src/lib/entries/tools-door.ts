/**
 * The door between the library and its tools (src/tools/: the CLI, the simulator,
 * `jobhook check`, the test helpers): what of the library the tools use and `jobhook`
 * does not export. The tools import the library through `jobhook` (src/index.ts, the Node
 * entry whose code their own entries take: tsup.config.ts) and this module only;
 * dependency-cruiser checks it, and test/architecture.test.ts that nothing here is exported
 * by `jobhook` too, or left unused by the tools. No package subpath exports it.
 *
 * What a change to the library's internals may break in the tools is listed here, and
 * nowhere else.
 */

// Option checks and their wording: the tools word their options as the library does (an
// OptionError names the option; the CLI turns the name into its flag).
export { OptionError, enable, option, optionError, type OptionMention } from '../base/option-error.js';
export {
  checkNumber,
  checkOptionNames,
  isHeaderName,
  nearestName,
  optionalNumber,
  type NumberRule,
  type OptionNamesOf,
} from '../base/options.js';
export { assertDialect } from '../core/canonical/dialects.js';

// The gateway's headers, one shape for the library and the tools: a tool that renames them
// takes `HeaderNameOptions` and lists `HEADER_NAME_OPTIONS`, so a header added to the
// library reaches the simulator, `jobhook check` and `signPayload` without a change there.
export { DEFAULT_HEADER_NAMES, HEADER_NAME_OPTIONS, type HeaderNameOptions } from '../core/verify/options.js';
// The simulator's job collection (public in `jobhook/gateway`, an entry that takes the
// WebCrypto verifier's code with it: the tools import no entry but `jobhook`).
export { JOBS_PATH } from '../base/protocol.js';
// The Content-Encodings a receiver decodes (the tools send some of them).
export type { ContentCoding } from '../receive/body.js';

// Bytes in pieces, in one array.
export { concatBytes } from '../base/bytes.js';

// Signing as the gateway does, with the private key checked once.
export { importPrivateKey, type SignOptions } from '../runtime/sign.js';

// The canonical engine's parts that write JSON as the gateway's senders do (the simulator's
// and the check's payloads keep `1.0` and Python's escapes).
export { formatFloat } from '../core/canonical/floats.js';
export { DEFAULT_MAX_DEPTH, parseDocument } from '../core/canonical/parse.js';
export { asciiToken, quoteUtf8 } from '../core/canonical/quote.js';
export { mapTree } from '../core/canonical/to-value.js';

// The verification's steps, bounded as the verifier is, for `jobhook explain` (why a
// delivery does not verify) and `jobhook canonicalize` (the canonical form, streamed); the
// WebAssembly engine loaded before the CLI's first command.
export { provablySame, unrepresentableReason } from '../core/canonical/serialize.js';
export { loadWasmEngine } from '../core/canonical/wasm/lazy.js';
export { boundedSink, parseBody, type CanonicalChunk, type ParsedBody } from '../core/verify/core.js';
export { getHeader } from '../core/verify/headers.js';
export { resolveOptions, type ResolvedOptions } from '../core/verify/options.js';
export { hexToBytes } from '../core/verify/signature.js';
export {
  importNodeKey,
  sha256OfHex,
  type ImportedNodeKey,
  type NodePublicKeyInput,
} from '../runtime/crypto/node.js';

/** The package's version (the CLI's `--version`, the check's `User-Agent`). */
export { VERSION } from '../base/version.js';
