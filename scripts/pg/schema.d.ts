import type { ClientBase } from 'pg'

/** The default schema name: `session_awareness`. */
export const DEFAULT_SCHEMA: string
/** The path of crates/core/src/postgres/schema.sql. */
export const FILE: string
/** Returns `name` if the store accepts it as a schema name (`[a-z_][a-z0-9_]{0,62}`, not `pg_…`); throws `ERR_INVALID_ARG` otherwise. */
export function checkSchemaName(name: string): string
/** The schema file's text with `schema` (default {@link DEFAULT_SCHEMA}) put in. */
export function schemaSql(schema?: string): string
/** Applies the schema file in one transaction on a connected client; rolls back on failure. */
export function applySchema(client: ClientBase, schema?: string): Promise<void>
