//! The PostgreSQL store's tables (schema.sql), applied at every open in one transaction:
//! additive (every statement `IF NOT EXISTS` or `ON CONFLICT DO NOTHING`), under an advisory
//! lock of its own so several gateways may open at once, in the schema the options name and
//! nowhere else.

use crate::error::Result;
use crate::postgres::conn::Pg;

/// The schema's SQL, `__SCHEMA__` standing for the schema's name.
pub(crate) const SCHEMA_SQL: &str = include_str!("schema.sql");

/// Creates what is missing of the store's tables in `pg`'s schema.
pub(crate) async fn apply(pg: &Pg) -> Result<()> {
    // The name was checked to be a plain identifier (`SchemaName`), so it needs no quoting.
    let sql = SCHEMA_SQL.replace("__SCHEMA__", pg.schema().as_str());
    let mut s = pg.lock().await?;
    let target = pg.target();
    let client = s.client()?;
    let tx = client.transaction().await.map_err(|e| target.error(&e))?;
    tx.batch_execute(&sql).await.map_err(|e| target.error(&e))?;
    tx.commit().await.map_err(|e| target.error(&e))
}
