/** Types of entries.mjs, the list of the package's public entries. */
export interface Entry {
  /** The subpath of package.json `exports` ('.', './express', …). */
  subpath: string;
  /** The module the entry is built from (src/….ts). */
  source: string;
  /** The entry whose whole code this entry's chunk takes (tsup.config.ts). */
  shares?: string;
  /** The module bundlers for edge runtimes get for the same subpath. */
  edge?: string;
}
export declare const ENTRIES: Entry[];
export declare const FILE_EXPORTS: Array<{ subpath: string; file: string; types: string }>;
export declare function distName(source: string): string;
export declare function exportsMap(): Record<string, unknown>;
