import { createRequire } from 'node:module';

/**
 * Loads an optional peer dependency synchronously, so a store whose client library
 * is missing fails at construction with the install command, not at the first request.
 */
export function requirePeer<T>(name: string, who: string): T {
  try {
    return createRequire(import.meta.url)(name) as T;
  } catch (err) {
    if (
      (err as { code?: string }).code === 'MODULE_NOT_FOUND' &&
      String((err as Error).message).includes(`'${name}'`)
    ) {
      throw new TypeError(
        `${who} needs the optional peer dependency ${name}, which is not installed: npm install ${name}`,
      );
    }
    throw err;
  }
}
