/**
 * The layers of src/lib, lowest first, and the tools beside them in src/tools
 * (ARCHITECTURE.md, whose two tables must name the same layers and folders). A module
 * imports only from its own layer and the layers below it, type-only imports included,
 * and no import goes round a cycle. The library never imports the tools; the tools
 * import the library through its Node entry (src/index.ts, `jobhook`) and one module made
 * for them, the door, only. Checked by `npm test` (test/architecture.test.ts) and
 * `npx depcruise src --config .dependency-cruiser.cjs`.
 */
const LAYERS = [
  ['base', ['base']],
  ['core', ['core']],
  ['runtime', ['runtime']],
  ['jobs', ['jobs']],
  // Four features over the job runner, side by side: none imports another.
  ['features', ['receive', 'stores', 'gateway', 'queues']],
  ['adapters', ['adapters']],
  ['entries', ['entries']],
];

/** The tools, lowest first: what signs and sends deliveries, the simulator, `jobhook check`, the command. */
const TOOL_LAYERS = [
  ['deliveries', ['deliveries']],
  ['simulator', ['simulator']],
  ['check', ['check']],
  ['cli', ['cli']],
];

/** The tools' entries in src/ (the `jobhook` command, `jobhook/testing`); every other src/*.ts is the library's. */
const TOOL_ENTRIES = ['cli', 'testing'];

/**
 * The library's modules the tools may import: `jobhook`, the Node entry whose code the
 * tools' entries take (tsup.config.ts; importing another entry would take that entry's
 * shared code into the tools' chunks), and the door, made for them.
 */
const NODE_ENTRY = 'src/index.ts';
const DOOR = 'src/lib/entries/tools-door.ts';

const escape = (path) => path.replace(/[.]/g, '\\.');
const toolEntry = `^src/(${TOOL_ENTRIES.join('|')})\\.ts$`;
const libraryEntry = `^src/(?!(${TOOL_ENTRIES.join('|')})\\.ts$)[^/]+\\.ts$`;
const otherLibraryEntry = `^src/(?!(${TOOL_ENTRIES.join('|')})\\.ts$)(?!${escape(NODE_ENTRY.slice(4))}$)[^/]+\\.ts$`;

/** Rules that no module of `root` imports a layer above its own (nor, for the library, an entry). */
function upwardRules(root, layers, alsoAbove) {
  const folder = (names) => `^src/${root}/(${names.join('|')})/`;
  const above = (index) => layers.slice(index + 1).flatMap(([, names]) => names);
  return layers.slice(0, -1).map(([layer, names], index) => ({
    name: `no-upward-from-${layer}`,
    comment: `${layer} (src/${root}/${names.join(`, src/${root}/`)}) must not import a higher layer (${above(index).join(', ')})${alsoAbove.length > 0 ? ' or an entry' : ''}`,
    severity: 'error',
    from: { path: folder(names) },
    to: { path: [folder(above(index)), ...alsoAbove] },
  }));
}

/** Features of one layer stay apart: each stands on the layers below only. */
const [, features] = LAYERS.find(([layer]) => layer === 'features');
const apart = features.map((name) => ({
  name: `no-${name}-to-other-features`,
  comment: `src/lib/${name} must not import another feature of its layer`,
  severity: 'error',
  from: { path: `^src/lib/${name}/` },
  to: { path: `^src/lib/(${features.filter((f) => f !== name).join('|')})/` },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import, type-only included, goes round a cycle.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'only-in-layers',
      comment: 'Every module of src/lib and src/tools lives in a layer folder.',
      severity: 'error',
      from: { path: '^src/(lib|tools)/[^/]+\\.ts$' },
      to: {},
    },
    ...upwardRules('lib', LAYERS, ['^src/[^/]+\\.ts$']),
    ...apart,
    ...upwardRules('tools', TOOL_LAYERS, [toolEntry]),
    {
      name: 'library-never-imports-tools',
      comment: 'The library (src/lib and its entries) must not import the tools or their entries.',
      severity: 'error',
      from: { path: ['^src/lib/', libraryEntry] },
      to: { path: ['^src/tools/', toolEntry] },
    },
    {
      name: 'tools-through-the-door',
      comment: `The tools import the library through ${NODE_ENTRY} and ${DOOR} only.`,
      severity: 'error',
      from: { path: ['^src/tools/', toolEntry] },
      to: { path: ['^src/lib/', otherLibraryEntry], pathNot: `^${escape(DOOR)}$` },
    },
    {
      name: 'door-only-for-tools',
      comment: `${DOOR} is for the tools (src/tools) only: the library and the entries do not import it.`,
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/tools/' },
      to: { path: `^${escape(DOOR)}$` },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a type that climbs a layer ties the layers as much as a value.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^(dist|node_modules)/' },
  },
};
// For test/architecture.test.ts (not configuration keys: dependency-cruiser reads enumerable keys only).
for (const [key, value] of Object.entries({ LAYERS, TOOL_LAYERS, TOOL_ENTRIES, NODE_ENTRY, DOOR }))
  Object.defineProperty(module.exports, key, { value, enumerable: false });
