/** The gateway's header names as a tool takes them: the library's one shape, each name checked. */
import {
  DEFAULT_HEADER_NAMES,
  isHeaderName,
  option,
  optionError,
  type HeaderNameOptions,
} from '../../lib/entries/tools-door.js';

/**
 * Every header name of `options` (`signatureHeader`, …), checked, with the protocol's
 * default for each one not given; an OptionError names the first that is not an HTTP
 * header name. Follows the library's list: a header added there is resolved here too.
 */
export function resolveHeaderNames(options: HeaderNameOptions): Readonly<Required<HeaderNameOptions>> {
  const names = { ...DEFAULT_HEADER_NAMES };
  for (const key of Object.keys(DEFAULT_HEADER_NAMES) as Array<keyof HeaderNameOptions>) {
    const value = options[key];
    if (value === undefined) continue;
    if (!isHeaderName(value))
      throw optionError`${option(key)} must be an HTTP header name; got ${JSON.stringify(value)}`;
    names[key] = value;
  }
  return Object.freeze(names);
}
