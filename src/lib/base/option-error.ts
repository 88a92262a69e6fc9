/**
 * A reference to an option inside an {@link OptionError} message. `enable` marks
 * a boolean option the reader should turn on (`allowInsecure: true` / `--allow-insecure`).
 */
export interface OptionMention {
  readonly option: string;
  readonly enable?: boolean;
}

/** Renders a mention in the library's words: the option name, or `name: true` for `enable`. */
export function libraryWording(mention: OptionMention): string {
  return mention.enable ? `${mention.option}: true` : mention.option;
}

/**
 * A bad option or argument of the tooling functions (a `TypeError`). The message
 * names options as the library spells them (`url`, `allowInsecure: true`); the CLI
 * re-renders the same message with its flags through {@link OptionError.describe},
 * so library code never speaks of flags and the CLI never parses messages.
 */
export class OptionError extends TypeError {
  readonly code = 'ERR_JOBHOOK_OPTION' as const;
  /** The option at fault (the first one the message names). */
  readonly option: string;
  readonly #parts: ReadonlyArray<string | OptionMention>;

  constructor(parts: ReadonlyArray<string | OptionMention>) {
    super(render(parts, libraryWording));
    this.name = 'OptionError';
    this.#parts = parts;
    const first = parts.find((p): p is OptionMention => typeof p !== 'string');
    this.option = first?.option ?? '';
  }

  /** The message with every option named by `name` (e.g. a CLI flag). */
  describe(name: (mention: OptionMention) => string): string {
    return render(this.#parts, name);
  }
}

function render(
  parts: ReadonlyArray<string | OptionMention>,
  name: (mention: OptionMention) => string,
): string {
  return parts.map((p) => (typeof p === 'string' ? p : name(p))).join('');
}

/** Names an option in an {@link optionError} template. */
export function option(name: string): OptionMention {
  return { option: name };
}

/** Names a boolean option the reader should turn on. */
export function enable(name: string): OptionMention {
  return { option: name, enable: true };
}

/**
 * Builds an {@link OptionError} from a template: `${option('url')} is not a URL: ${value}`.
 * Interpolated strings and numbers are kept as they are; mentions are rendered per audience.
 */
export function optionError(
  strings: TemplateStringsArray,
  ...values: ReadonlyArray<string | number | OptionMention>
): OptionError {
  const parts: Array<string | OptionMention> = [];
  strings.forEach((s, k) => {
    if (s !== '') parts.push(s);
    if (k < values.length) {
      const v = values[k]!;
      parts.push(typeof v === 'object' ? v : String(v));
    }
  });
  return new OptionError(parts);
}
