// The walk of a factory's options: the files ("rooms") a maintainer reads to follow them.
// From the factory's `options` parameter, every function the user's object is passed to
// (with --parts, also a property read off it: `resolveLogger(options.log)`), followed into
// its declaration; then the files that declare the options' properties. Prints the steps
// and the rooms of each, and of both.
//
//   node scripts/options-walk.mjs [ENTRY FACTORY] [--parts]    (default: src/express.ts createReceiver)
import { join, relative } from 'node:path';
import ts from 'typescript';

const args = process.argv.slice(2);
const parts = args.includes('--parts');
const [entry = 'src/express.ts', factory = 'createReceiver'] = args.filter((a) => !a.startsWith('--'));
const root = process.cwd();
const config = ts.getParsedCommandLineOfConfigFile(
  join(root, 'tsconfig.json'),
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: () => {},
  },
);
const program = ts.createProgram([join(root, entry)], config.options);
const checker = program.getTypeChecker();
const fileOf = (node) => relative(root, node.getSourceFile().fileName);

/** The function a call's callee names: a declaration, an arrow or function assigned to a const, a constructor. */
function calleeOf(expression) {
  let symbol = checker.getSymbolAtLocation(
    ts.isPropertyAccessExpression(expression) ? expression.name : expression,
  );
  if (symbol !== undefined && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
  const declaration = symbol?.valueDeclaration ?? symbol?.declarations?.[0];
  if (declaration === undefined) return undefined;
  if (ts.isFunctionLike(declaration) && declaration.body !== undefined) return declaration;
  if (
    ts.isVariableDeclaration(declaration) &&
    declaration.initializer &&
    ts.isFunctionLike(declaration.initializer)
  )
    return declaration.initializer;
  if (ts.isClassDeclaration(declaration)) return declaration.members.find(ts.isConstructorDeclaration);
  return undefined;
}

const walked = new Set();
const called = new Set();
const steps = [];
function walk(fn, index, from) {
  const parameter = fn.parameters[index];
  const key = `${fn.getSourceFile().fileName}:${fn.pos}:${index}`;
  if (parameter === undefined || !ts.isIdentifier(parameter.name) || walked.has(key)) return;
  walked.add(key);
  const file = fileOf(fn);
  if (file.startsWith('node_modules')) return;
  called.add(file);
  steps.push(`${from} → ${file} (${fn.name?.getText() ?? 'a function'})`);
  const name = parameter.name.text;
  const isOptions = (arg) =>
    (ts.isIdentifier(arg) && arg.text === name) ||
    (ts.isAsExpression(arg) && isOptions(arg.expression)) ||
    (parts && ts.isPropertyAccessExpression(arg) && isOptions(arg.expression));
  const visit = (node) => {
    if ((ts.isCallExpression(node) || ts.isNewExpression(node)) && node.arguments !== undefined)
      node.arguments.forEach((arg, i) => {
        const callee = isOptions(arg) ? calleeOf(node.expression) : undefined;
        if (callee !== undefined) walk(callee, i, file);
      });
    ts.forEachChild(node, visit);
  };
  if (fn.body !== undefined) visit(fn.body);
}

const factoryDeclaration = program
  .getSourceFile(join(root, entry))
  ?.statements.find((s) => ts.isFunctionDeclaration(s) && s.name?.text === factory);
if (factoryDeclaration === undefined) throw new Error(`options-walk: no function ${factory} in ${entry}`);
walk(factoryDeclaration, 0, 'the user');

const declared = new Map();
const properties = checker.getPropertiesOfType(checker.getTypeAtLocation(factoryDeclaration.parameters[0]));
for (const property of properties)
  for (const d of property.declarations ?? []) declared.set(fileOf(d), (declared.get(fileOf(d)) ?? 0) + 1);

console.log(steps.join('\n'));
console.log(`\nthe options pass through ${called.size} files: ${[...called].join(', ')}`);
console.log(
  `${properties.length} options are declared in ${declared.size} files: ${[...declared].map(([f, n]) => `${f} (${n})`).join(', ')}`,
);
console.log(`rooms, both: ${new Set([...called, ...declared.keys()]).size}`);
