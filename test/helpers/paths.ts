import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const FIXTURES = join(ROOT, 'fixtures');

export function fixture(...parts: string[]): string {
  return join(FIXTURES, ...parts);
}

export function readFixture(...parts: string[]): string {
  return readFileSync(fixture(...parts), 'utf8');
}

export function readFixtureBytes(...parts: string[]): Uint8Array {
  return new Uint8Array(readFileSync(fixture(...parts)));
}
