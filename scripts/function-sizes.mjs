#!/usr/bin/env node
// Lists the functions of src/ longer than a number of lines (default 60), longest first:
// function declarations, methods, arrow functions and function expressions, each counted
// from its first line to its last (nested functions count in their parent too).
// `node scripts/function-sizes.mjs [minLines] [--max N]`: with --max, exits 1 when one is over N.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const args = process.argv.slice(2);
const maxAt = args.indexOf('--max');
const max = maxAt >= 0 ? Number(args[maxAt + 1]) : undefined;
const min = Number(args.find((a, i) => /^\d+$/.test(a) && (maxAt < 0 || i !== maxAt + 1)) ?? 60);
const root = new URL('..', import.meta.url).pathname;

function* files(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) yield path;
  }
}

const found = [];
for (const file of files(join(root, 'src'))) {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      const name =
        node.name?.getText(source) ??
        (ts.isVariableDeclaration(node.parent)
          ? node.parent.name.getText(source)
          : ts.isPropertyAssignment(node.parent)
            ? node.parent.name.getText(source)
            : '(anonymous)');
      if (lines > min) found.push({ lines, where: `${relative(root, file)}:${start + 1}`, name });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}
found.sort((a, b) => b.lines - a.lines);
for (const f of found) console.log(`${String(f.lines).padStart(4)}  ${f.where}  ${f.name}`);
console.log(`${found.length} functions over ${min} lines`);
if (max !== undefined && found.some((f) => f.lines > max)) process.exitCode = 1;
