/**
 * The documentation the tests hold to the code: README.md and every page of docs/. A
 * recipe or a command checked by a test may live on any of them (the README links to
 * the pages), so the tests read them all.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './paths.js';

/** README.md, then docs/*.md in name order (paths relative to the repository). */
export function docFiles(): string[] {
  const pages = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...pages];
}

/** Every documentation file with its text. */
export function docs(): Array<{ file: string; text: string }> {
  return docFiles().map((file) => ({ file, text: readFileSync(join(ROOT, file), 'utf8') }));
}

/** All the documentation as one text (each file's text after a line naming it). */
export function allDocsText(): string {
  return docs()
    .map(({ file, text }) => `<!-- file: ${file} -->\n${text}`)
    .join('\n');
}
