/**
 * The documentation holds together: the README stays a five-minute read (at most 300
 * lines, the rest in docs/), and every relative link of the README and docs/*.md points
 * to a file of the repository and, with a #fragment, to a heading (or an id) of that file.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { docs } from './helpers/docs.js';
import { ROOT } from './helpers/paths.js';

/** Pages other branches write (linked from here already); the check skips them until they exist. */
const WRITTEN_ELSEWHERE = new Set([
  'docs/security.md',
  'docs/store-sqlite.md',
  'docs/store-cloudflare.md',
  'docs/store-deno.md',
  'docs/exactly-once.md',
]);

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown file: its headings' slugs (outside code blocks) and its `<a id>`s. */
function anchors(text: string): Set<string> {
  const out = new Set<string>();
  const prose = text.replace(/^```[\s\S]*?^```$/gm, '');
  for (const m of prose.matchAll(/^#{1,6} (.+)$/gm)) out.add(slug(m[1]!));
  for (const m of prose.matchAll(/<a id="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

describe('the documentation', () => {
  it('README.md is at most 300 lines', () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(300);
  });

  it.each(docs().map((d) => [d.file, d.text] as const))('%s: every relative link resolves', (file, text) => {
    const broken: string[] = [];
    const prose = text.replace(/^```[\s\S]*?^```$/gm, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
      const link = m[1]!;
      if (/^[a-z]+:/.test(link)) continue; // https:, mailto:
      const [path, fragment] = link.split('#') as [string, string | undefined];
      const target = path === '' ? file : normalize(join(dirname(file), path));
      if (WRITTEN_ELSEWHERE.has(target) && !existsSync(join(ROOT, target))) continue;
      if (!existsSync(join(ROOT, target))) {
        broken.push(`${link} (no file ${target})`);
        continue;
      }
      if (fragment === undefined || !target.endsWith('.md')) continue;
      if (!anchors(readFileSync(join(ROOT, target), 'utf8')).has(fragment))
        broken.push(`${link} (no heading #${fragment} in ${target})`);
    }
    expect(broken).toEqual([]);
  });
});
