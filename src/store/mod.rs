//! The SQL store: one code path for PostgreSQL, MySQL/MariaDB and SQLite through sqlx's
//! `Any` driver. Queries are written once with `?` placeholders; [`Backend::sql`] turns
//! them into `$1, $2, ...` for PostgreSQL. Every access goes through a [`Tx`], so reads
//! and the writes with their audit event share one code path and one transaction.

mod access_tokens;
mod api_keys;
mod apps;
mod audit;
mod flashes;
mod ids;
mod memberships;
mod oidc;
mod policies;
mod policy_rows;
mod policy_versions;
mod sessions;
mod users;
mod webhooks;

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use prometheus::IntCounter;
use secrecy::{ExposeSecret, SecretString};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{Any, AnyConnection, AnyPool, AssertSqlSafe, Connection, Transaction};

pub use access_tokens::{AccessTokenRecord, TokenOwner, TokenTerms};
pub use api_keys::{ApiKeyRecord, KeyGrant, REVOKED_KEYS_KEPT_MS};
pub use apps::AppRecord;
pub use audit::{AUDIT_EXPORT_MAX, AuditChoices, AuditEntry, AuditFilter, AuditRecord, Author};
pub use ids::{new_id, now_ms};
pub use memberships::MemberRecord;
pub use oidc::OidcSignInRecord;
pub use policy_rows::{PolicyBrief, PolicyRecord};
pub use policy_versions::PolicyVersionRecord;
pub use sessions::SessionRecord;
pub use users::UserRecord;
pub use webhooks::{
    AttemptRecord, DeliveryRecord, DueDelivery, NewWebhook, WatchingWebhook, WebhookRecord,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    MySql,
    Sqlite,
}

impl Backend {
    fn of_url(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Ok(Self::MySql)
        } else if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else {
            anyhow::bail!("database_url must start with postgres://, mysql:// or sqlite:")
        }
    }

    /// The query with PostgreSQL's numbered placeholders where needed. Queries are
    /// static strings of ours, so the rewrite cannot inject anything.
    fn sql(self, query: &'static str) -> AssertSqlSafe<Cow<'static, str>> {
        if self != Self::Postgres || !query.contains('?') {
            return AssertSqlSafe(Cow::Borrowed(query));
        }
        AssertSqlSafe(Cow::Owned(Self::number_placeholders(query)))
    }

    /// A query assembled at run time from fragments of ours (filters), never from input.
    fn sql_built(self, query: String) -> AssertSqlSafe<Cow<'static, str>> {
        if self != Self::Postgres {
            return AssertSqlSafe(Cow::Owned(query));
        }
        AssertSqlSafe(Cow::Owned(Self::number_placeholders(&query)))
    }

    fn number_placeholders(query: &str) -> String {
        let mut out = String::with_capacity(query.len() + 8);
        let mut n = 0;
        for c in query.chars() {
            if c == '?' {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// Storage errors a caller can act on; everything else is `Other`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique constraint refused the row (name taken).
    #[error("already exists")]
    Conflict,
    /// The database cannot be reached (no connection within the pool's acquire timeout,
    /// or the connection broke): worth retrying later, not a bug.
    #[error("the database is unreachable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// The database aborted the transaction to break a deadlock with a simultaneous one,
    /// or as a serialization failure: nothing of it was saved, and running it again from
    /// the start is safe.
    #[error("the database aborted the transaction: {0}")]
    Aborted(#[source] sqlx::Error),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::Conflict,
            // SQLSTATE serialization_failure (MySQL's deadlock, 1213, reports it too) and
            // PostgreSQL's deadlock_detected.
            sqlx::Error::Database(db)
                if matches!(db.code().as_deref(), Some("40001" | "40P01")) =>
            {
                Self::Aborted(e)
            }
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::WorkerCrashed => Self::Unavailable(e),
            _ => Self::Other(anyhow::Error::new(e)),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// Statements run (ours, not BEGIN/COMMIT): a page's cost, for metrics and tests.
    statements: IntCounter,
}

static MIGRATE_POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");
static MIGRATE_MYSQL: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/mysql");
static MIGRATE_SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// How long a request waits for a database connection by default (see
/// [`Store::connect_with_timeout`]).
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the first connection at start may take before the start fails, naming why.
const FIRST_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A counter nothing reads, until a registered one replaces it.
fn unregistered_counter() -> IntCounter {
    IntCounter::new("unregistered", "not exported").expect("a valid name")
}

/// A database URL as it may be shown: without its password.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => "(an unreadable URL)".to_owned(),
    }
}

impl Store {
    pub async fn connect(url: &SecretString) -> anyhow::Result<Self> {
        Self::connect_with_timeout(url, DEFAULT_ACQUIRE_TIMEOUT).await
    }

    /// Connects once to say at once why the database cannot be reached, if it cannot
    /// (naming the URL without its password); then opens the pool, whose requests wait
    /// at most `acquire_timeout` for a connection (an outage answers 503, not a hang).
    pub async fn connect_with_timeout(
        url: &SecretString,
        acquire_timeout: Duration,
    ) -> anyhow::Result<Self> {
        sqlx::any::install_default_drivers();
        let url = url.expose_secret();
        let backend = Backend::of_url(url)?;
        let url = match backend {
            // Create the SQLite file on first start, so `ratekeeper` runs on an empty dir.
            Backend::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_owned(),
        };
        let shown = redacted(&url);
        let options = AnyConnectOptions::from_str(&url)
            .map_err(|e| anyhow::anyhow!("invalid database_url {shown}: {e}"))?;
        match tokio::time::timeout(FIRST_CONNECT_TIMEOUT, AnyConnection::connect_with(&options))
            .await
        {
            Err(_) => anyhow::bail!(
                "cannot connect to the database at {shown}: no answer within {} s",
                FIRST_CONNECT_TIMEOUT.as_secs()
            ),
            Ok(Err(e)) => anyhow::bail!("cannot connect to the database at {shown}: {e}"),
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
            }
        }
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 4 } else { 10 })
            .acquire_timeout(acquire_timeout)
            .connect_lazy_with(options);
        if backend == Backend::Sqlite {
            // WAL lets readers run beside the one writer; it is a property of the file,
            // so setting it on one connection is enough.
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await
                .context("cannot switch SQLite to WAL")?;
        }
        Ok(Self {
            pool,
            backend,
            statements: unregistered_counter(),
        })
    }

    /// The same store (one pool), counting its statements into `counter` (a registered
    /// metric).
    pub fn counting_into(mut self, counter: IntCounter) -> Self {
        self.statements = counter;
        self
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Applies the migrations of this backend that have not run yet.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let migrator = match self.backend {
            Backend::Postgres => &MIGRATE_POSTGRES,
            Backend::MySql => &MIGRATE_MYSQL,
            Backend::Sqlite => &MIGRATE_SQLITE,
        };
        migrator
            .run(&self.pool)
            .await
            .context("database migration failed")
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn begin(&self) -> StoreResult<Tx> {
        let inner = match self.backend {
            // SQLite has one writer. A deferred transaction that reads and then writes
            // fails at once ("database is locked") when another wrote meanwhile; taking
            // the write lock up front makes it wait (busy_timeout) instead. Almost every
            // transaction here writes (an access token's last use, an audit event).
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres | Backend::MySql => self.pool.begin().await?,
        };
        Ok(Tx {
            inner,
            backend: self.backend,
            statements: self.statements.clone(),
        })
    }

    /// A transaction that only reads. On SQLite it does not take the write lock, so reads
    /// run beside the writer (WAL) instead of queueing behind it; writing in it could
    /// fail with "database is locked", so it must not write.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn begin_read(&self) -> StoreResult<Tx> {
        Ok(Tx {
            inner: self.pool.begin().await?,
            backend: self.backend,
            statements: self.statements.clone(),
        })
    }

    /// `SELECT 1`, for readiness.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// One transaction; the store's operations are methods on it (see the sibling modules).
pub struct Tx {
    inner: Transaction<'static, Any>,
    backend: Backend,
    statements: IntCounter,
}

impl Tx {
    pub async fn commit(self) -> StoreResult<()> {
        self.inner.commit().await?;
        Ok(())
    }

    /// A statement of ours, counted, in this backend's placeholders.
    fn sql(&self, query: &'static str) -> AssertSqlSafe<Cow<'static, str>> {
        self.statements.inc();
        self.backend.sql(query)
    }

    /// The same for a statement assembled from fragments of ours.
    fn sql_built(&self, query: String) -> AssertSqlSafe<Cow<'static, str>> {
        self.statements.inc();
        self.backend.sql_built(query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_for_postgres_only() {
        let q = "SELECT a FROM t WHERE b = ? AND c = ?";
        assert_eq!(
            Backend::Postgres.sql(q).0,
            "SELECT a FROM t WHERE b = $1 AND c = $2"
        );
        assert_eq!(Backend::MySql.sql(q).0, q);
        assert_eq!(Backend::Sqlite.sql(q).0, q);
    }
}
