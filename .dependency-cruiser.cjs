/**
 * The layers of src/lib, lowest first (ARCHITECTURE.md, whose table must name the same
 * layers and folders). A module imports only from its own layer and the layers below it,
 * type-only imports included, and no import goes round a cycle. Checked by `npm test`
 * (test/architecture.test.ts) and `npx depcruise src --config .dependency-cruiser.cjs`.
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

const folder = (names) => `^src/lib/(${names.join('|')})/`;
const above = (index) => LAYERS.slice(index + 1).flatMap(([, names]) => names);

const upward = LAYERS.slice(0, -1).map(([layer, names], index) => ({
  name: `no-upward-from-${layer}`,
  comment: `${layer} (src/lib/${names.join(', src/lib/')}) must not import a higher layer (${above(index).join(', ')}) or an entry`,
  severity: 'error',
  from: { path: folder(names) },
  to: { path: [folder(above(index)), '^src/[^/]+\\.ts$'] },
}));

/** Features of one layer stay apart: each stands on the layers below only. */
const [, features] = LAYERS.find(([layer]) => layer === 'features');
const apart = features.map((name) => ({
  name: `no-${name}-to-other-features`,
  comment: `src/lib/${name} must not import another feature of its layer`,
  severity: 'error',
  from: { path: folder([name]) },
  to: { path: folder(features.filter((f) => f !== name)) },
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
      name: 'lib-only-in-layers',
      comment: 'Every module of src/lib lives in a layer folder.',
      severity: 'error',
      from: { path: '^src/lib/[^/]+\\.ts$' },
      to: {},
    },
    ...upward,
    ...apart,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a type that climbs a layer ties the layers as much as a value.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^(dist|node_modules)/' },
  },
};
// For test/architecture.test.ts (not a configuration key: dependency-cruiser reads enumerable keys only).
Object.defineProperty(module.exports, 'LAYERS', { value: LAYERS, enumerable: false });
