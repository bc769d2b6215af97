use crate::domain::Username;

use super::{StoreResult, Tx, new_id, now_ms};

#[derive(Clone, sqlx::FromRow)]
pub struct UserRecord {
    pub id: String,
    pub username: String,
    pub password_hash: String,
    pub is_admin: i64,
    pub disabled: i64,
    pub created_ms: i64,
}

impl std::fmt::Debug for UserRecord {
    // The password hash stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserRecord")
            .field("id", &self.id)
            .field("username", &self.username)
            .field("is_admin", &self.is_admin)
            .field("disabled", &self.disabled)
            .finish_non_exhaustive()
    }
}

impl UserRecord {
    pub fn is_admin(&self) -> bool {
        self.is_admin != 0
    }

    pub fn is_disabled(&self) -> bool {
        self.disabled != 0
    }
}

impl Tx {
    #[tracing::instrument(level = "debug", skip_all, fields(username = %username))]
    pub async fn insert_user(
        &mut self,
        username: &Username,
        password_hash: &str,
        is_admin: bool,
    ) -> StoreResult<UserRecord> {
        let now = now_ms();
        let record = UserRecord {
            id: new_id(),
            username: username.to_string(),
            password_hash: password_hash.to_owned(),
            is_admin: i64::from(is_admin),
            disabled: 0,
            created_ms: now,
        };
        sqlx::query(self.sql(
            "INSERT INTO users (id, username, password_hash, is_admin, disabled, created_ms, updated_ms) \
             VALUES (?, ?, ?, ?, 0, ?, ?)",
        ))
        .bind(&record.id)
        .bind(&record.username)
        .bind(&record.password_hash)
        .bind(record.is_admin)
        .bind(now)
        .bind(now)
        .execute(&mut *self.inner)
        .await?;
        Ok(record)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(username = %username))]
    pub async fn user_by_name(&mut self, username: &str) -> StoreResult<Option<UserRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, username, password_hash, is_admin, disabled, created_ms FROM users WHERE username = ?",
        ))
        .bind(username)
        .fetch_optional(&mut *self.inner)
        .await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn count_users(&mut self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(self.sql("SELECT COUNT(*) FROM users"))
            .fetch_one(&mut *self.inner)
            .await?)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub async fn user_by_id(&mut self, id: &str) -> StoreResult<Option<UserRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, username, password_hash, is_admin, disabled, created_ms FROM users WHERE id = ?",
        ))
        .bind(id)
        .fetch_optional(&mut *self.inner)
        .await?)
    }

    /// Every user, by name.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list_users(&mut self) -> StoreResult<Vec<UserRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, username, password_hash, is_admin, disabled, created_ms FROM users ORDER BY username",
        ))
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// How many enabled admins there are: the last one may not be demoted or disabled.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn count_active_admins(&mut self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(
            self.sql("SELECT COUNT(*) FROM users WHERE is_admin = 1 AND disabled = 0"),
        )
        .fetch_one(&mut *self.inner)
        .await?)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub async fn set_user_flags(
        &mut self,
        id: &str,
        is_admin: bool,
        disabled: bool,
    ) -> StoreResult<()> {
        sqlx::query(
            self.sql("UPDATE users SET is_admin = ?, disabled = ?, updated_ms = ? WHERE id = ?"),
        )
        .bind(i64::from(is_admin))
        .bind(i64::from(disabled))
        .bind(now_ms())
        .bind(id)
        .execute(&mut *self.inner)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub async fn set_password_hash(&mut self, id: &str, password_hash: &str) -> StoreResult<()> {
        sqlx::query(self.sql("UPDATE users SET password_hash = ?, updated_ms = ? WHERE id = ?"))
            .bind(password_hash)
            .bind(now_ms())
            .bind(id)
            .execute(&mut *self.inner)
            .await?;
        Ok(())
    }
}
