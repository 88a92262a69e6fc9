/**
 * The PostgreSQL store's readiness check: one statement that asks the catalog whether
 * its schema, tables, sequence and columns are there, so `ready()` and `health()` say
 * "not migrated" (and what is missing) instead of the first delivery's 42P01.
 */
import type { Pool } from 'pg';
import { StoreNotMigratedError } from '../base/errors.js';
import { MIGRATE_FIX } from './diagnose.js';

/** The columns of the jobs table as this version writes it (migrate() adds those an earlier version lacked). */
const JOB_COLUMNS = ['job_id', 'token', 'state', 'expires_at', 'stale_at', 'fence', 'took_over'];

/** What the check looks for: the names as written, and quoted (schema-qualified) for to_regclass. */
export interface StoreRelations {
  schema: string;
  table: string;
  /** Quoted, schema-qualified: the jobs table, the pending table, the fencing sequence. */
  jobs: string;
  pending: string;
  fence: string;
}

/** Undefined when everything is there; else the StoreNotMigratedError that names what is missing and the fix. */
export async function checkSchema(
  pool: Pool,
  backend: string,
  r: StoreRelations,
): Promise<StoreNotMigratedError | undefined> {
  const { rows } = await pool.query<{
    schema: boolean;
    jobs: boolean;
    pending: boolean;
    fence: boolean;
    columns: string[];
  }>(
    `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema,
            to_regclass($2) IS NOT NULL AS jobs, to_regclass($3) IS NOT NULL AS pending, to_regclass($4) IS NOT NULL AS fence,
            ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass($2) AND attnum > 0 AND NOT attisdropped) AS columns`,
    [r.schema, r.jobs, r.pending, r.fence],
  );
  const found = rows[0]!;
  const table = `${r.schema}.${r.table}`;
  if (!found.schema) {
    return new StoreNotMigratedError(
      `${backend}: the schema "${r.schema}" does not exist, so neither does the store's table ${table}. Create the schema (CREATE SCHEMA "${r.schema}"), or give the store the schema its tables are in; then ${lower(MIGRATE_FIX)}`,
    );
  }
  if (!found.jobs)
    return new StoreNotMigratedError(
      `${backend}: the store's table ${table} does not exist (migrate() was not run on this database and schema). ${MIGRATE_FIX}`,
    );
  const columns = JOB_COLUMNS.filter((c) => !found.columns.includes(c));
  const missing = [
    ...(columns.length === 0
      ? []
      : [`the table ${table} lacks the column${columns.length === 1 ? '' : 's'} ${columns.join(', ')}`]),
    ...(found.pending ? [] : [`the table ${r.pending} does not exist`]),
    ...(found.fence ? [] : [`the sequence ${r.fence} does not exist`]),
  ];
  if (missing.length === 0) return undefined;
  return new StoreNotMigratedError(
    `${backend}: ${missing.join('; ')} (made by an earlier version of jobhook, or by hand). ${MIGRATE_FIX}`,
  );
}

const lower = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);
