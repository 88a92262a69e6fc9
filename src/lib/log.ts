/**
 * The logger jobhook writes to: any object with some of `debug`, `info`, `warn`,
 * `error` (console, pino, winston, a custom one). Methods it lacks are no-ops.
 * Each call is `(message, details?)`.
 */
export interface Logger {
  debug(message: string, details?: Record<string, unknown>): void;
  info(message: string, details?: Record<string, unknown>): void;
  warn(message: string, details?: Record<string, unknown>): void;
  error(message: string, details?: Record<string, unknown>): void;
}

/** What `log` options accept: any subset of the four methods. */
export type LoggerInput = Partial<Logger>;

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;

/**
 * The default: warnings and errors to the console (a failing store or handler must not
 * go unseen); rejected deliveries are debug/info, so unsigned traffic floods nothing.
 */
const CONSOLE: LoggerInput = {
  warn: (...args) => console.warn(...args),
  error: (...args) => console.error(...args),
};

/** A complete logger from a partial one (default: warn and error to the console). */
export function resolveLogger(input: LoggerInput | undefined, what = 'log'): Logger {
  const source = input ?? CONSOLE;
  if (typeof source !== 'object' || source === null) throw new TypeError(`${what} must be an object with some of debug, info, warn, error`);
  const out = {} as Logger;
  for (const level of LEVELS) {
    const fn = source[level];
    if (fn !== undefined && typeof fn !== 'function') throw new TypeError(`${what}.${level} must be a function`);
    out[level] =
      fn === undefined
        ? () => undefined
        : (message, details) => {
            // A logger that throws (a closed stream, a bad transport) must not turn a
            // delivery into a 500 or stop a store repair half way: the line is lost.
            try {
              if (details === undefined) fn.call(source, message);
              else fn.call(source, message, details);
            } catch {
              // nothing better to do with it
            }
          };
  }
  return out;
}

/** The cause chain of an error as log details (never sent to a client). */
export function errorDetails(err: unknown): Record<string, unknown> {
  if (err instanceof Error) {
    const details: Record<string, unknown> = { error: `${err.name}: ${err.message}` };
    if ((err as { code?: unknown }).code !== undefined) details.code = (err as { code?: unknown }).code;
    if (err.cause !== undefined) details.cause = err.cause instanceof Error ? `${err.cause.name}: ${err.cause.message}` : String(err.cause);
    return details;
  }
  return { error: String(err) };
}
