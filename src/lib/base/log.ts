/**
 * The logger jobhook writes to: any object with some of `debug`, `info`, `warn`,
 * `error` (console, pino, winston, a custom one). Methods it lacks are no-ops.
 *
 * Each call is `(message, details?)`: a string, then a plain object of strings and
 * numbers (`error`, `stack`, `code`, `cause`…). That is how console, winston and most
 * loggers read two arguments. pino reads two arguments the other way round (an object,
 * then the message) and drops an object that comes second, so a pino logger
 * (recognised by pino's own `Symbol.for('pino.serializers')`, which every pino
 * logger and child has) is called `(details, message)`. No one shape serves both:
 * winston takes an object that comes first for the message itself.
 */
import { safeMessage } from './text.js';

export interface Logger {
  debug(message: string, details?: Record<string, unknown>): void;
  info(message: string, details?: Record<string, unknown>): void;
  warn(message: string, details?: Record<string, unknown>): void;
  error(message: string, details?: Record<string, unknown>): void;
}

/** What `log` options accept: any subset of the four methods, or `false` for silence. */
export type LoggerInput = Partial<Logger> | false;

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;

/** Set on every pino logger and child (pino's public symbols are shared across its versions). */
const PINO = Symbol.for('pino.serializers');

/** True for a pino logger (Fastify's `app.log` and `request.log` are pino loggers too). */
function isPino(source: object): boolean {
  return PINO in source;
}

/**
 * The default: warnings and errors to the console (a failing store or handler must not
 * go unseen); rejected deliveries are debug/info, so unsigned traffic floods nothing.
 */
const CONSOLE: LoggerInput = {
  warn: (...args) => console.warn(...args),
  error: (...args) => console.error(...args),
};

type Write = (
  fn: (...args: unknown[]) => unknown,
  source: object,
  message: string,
  details: Record<string, unknown>,
) => void;

const messageFirst: Write = (fn, source, message, details) => fn.call(source, message, details);
const objectFirst: Write = (fn, source, message, details) => fn.call(source, details, message);

const SILENT: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** A complete logger from a partial one (default: warn and error to the console; `false`: nothing). */
export function resolveLogger(input: LoggerInput | undefined, what = 'log'): Logger {
  if (input === false) return SILENT;
  const source = input ?? CONSOLE;
  if (typeof source !== 'object' || source === null)
    throw new TypeError(`${what} must be an object with some of debug, info, warn, error`);
  const write = isPino(source) ? objectFirst : messageFirst;
  const out = {} as Logger;
  for (const level of LEVELS) {
    const fn = source[level] as ((...args: unknown[]) => unknown) | undefined;
    if (fn !== undefined && typeof fn !== 'function')
      throw new TypeError(`${what}.${level} must be a function`);
    out[level] =
      fn === undefined
        ? () => undefined
        : (message, details) => {
            // A logger that throws (a closed stream, a bad transport) must not turn a
            // delivery into a 500 or stop a store repair half way: the line is lost.
            // Messages may quote a request (bounded where they are made): escaped and cut here too.
            try {
              if (details === undefined) fn.call(source, safeMessage(message));
              else write(fn, source, safeMessage(message), details);
            } catch {
              // nothing better to do with it
            }
          };
  }
  return out;
}

/** Causes followed at most (a cycle or a very long chain stops here). */
const MAX_CAUSES = 5;

/** `Name: message`; an AggregateError without a message (Node's failed connection attempts) says its errors'. */
function summary(err: Error): string {
  const inner = (err as { errors?: unknown }).errors;
  const message =
    err.message === '' && Array.isArray(inner) && inner.length > 0
      ? inner.map((e) => (e instanceof Error ? e.message : String(e))).join('; ')
      : err.message;
  return `${err.name}: ${message}`;
}

/** A stack's frames: the lines from its first `    at `, which follow the error's own text. */
function frames(stack: string): string {
  const at = stack.search(/\n\s+at /);
  return at === -1 ? stack : stack.slice(at + 1);
}

/** A cause on one line, with its code. */
function oneLine(err: Error): string {
  const code = (err as { code?: unknown }).code;
  return `${summary(err)}${typeof code === 'string' || typeof code === 'number' ? ` (code ${code})` : ''}`;
}

/**
 * An error as log details (never sent to a client): `error` (`Name: message`; its name
 * alone when `line`, the message logged with them, already says the message), `stack` (its frames: the
 * first line of a stack repeats `error`), `code` when it has one, and `cause`, the chain of
 * causes on one line (`A ← B`). Strings only, so every logger keeps them (winston's JSON
 * format writes an Error as `{}`).
 */
export function errorDetails(err: unknown, line?: string): Record<string, unknown> {
  if (!(err instanceof Error)) return line?.includes(String(err)) ? {} : { error: String(err) };
  const said = line !== undefined && err.message !== '' && line.includes(err.message);
  const details: Record<string, unknown> = { error: said ? err.name : summary(err) };
  const code = (err as { code?: unknown }).code;
  if (code !== undefined) details.code = code;
  if (typeof err.stack === 'string') details.stack = frames(err.stack);
  const causes: string[] = [];
  const seen = new Set<unknown>([err]);
  for (
    let cause = err.cause;
    cause !== undefined && !seen.has(cause) && causes.length < MAX_CAUSES;
    cause = cause instanceof Error ? cause.cause : undefined
  ) {
    seen.add(cause);
    causes.push(cause instanceof Error ? oneLine(cause) : String(cause));
  }
  if (causes.length > 0) details.cause = causes.join(' ← ');
  return details;
}
