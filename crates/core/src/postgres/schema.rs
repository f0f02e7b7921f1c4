//! The PostgreSQL store's tables (schema.sql), applied at every open in one transaction:
//! additive (every statement `IF NOT EXISTS` or `ON CONFLICT DO NOTHING`), under an advisory
//! lock of its own so several gateways may open at once, in the schema the options name and
//! nowhere else.

use crate::error::{Error, Result};
use crate::postgres::conn::Pg;
use crate::postgres::settings;

/// The schema's SQL, `__SCHEMA__` standing for the schema's name.
pub(crate) const SCHEMA_SQL: &str = include_str!("schema.sql");

/// Creates what is missing of the store's tables in `pg`'s schema. A read-only server is
/// refused first ([`settings::refuse_read_only`]); any other failure names the schema.
pub(crate) async fn apply(pg: &Pg) -> Result<()> {
    // The name was checked to be a plain identifier (`SchemaName`), so it needs no quoting.
    let sql = SCHEMA_SQL.replace("__SCHEMA__", pg.schema().as_str());
    let mut s = pg.lock().await?;
    let target = pg.target();
    let client = s.client()?;
    settings::refuse_read_only(client, target).await?;
    let named = |e: tokio_postgres::Error| naming(target.error(&e), pg);
    let tx = client.transaction().await.map_err(named)?;
    tx.batch_execute(&sql).await.map_err(named)?;
    tx.commit().await.map_err(named)
}

/// `e` with the schema's name in front of its message (a role that may not create it gets
/// the server's "permission denied for database …", which names no schema).
fn naming(e: Error, pg: &Pg) -> Error {
    match e {
        Error::Db { kind, message } => Error::Db {
            kind,
            message: format!("schema \"{}\": {message}", pg.schema().as_str()),
        },
        other => other,
    }
}
