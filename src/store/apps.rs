use serde::Serialize;

use crate::domain::AppSlug;

use super::{StoreResult, Tx, new_id, now_ms};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct AppRecord {
    #[serde(skip)]
    pub id: String,
    pub slug: String,
    pub name: String,
    pub description: String,
    pub created_ms: i64,
}

impl Tx {
    #[tracing::instrument(level = "debug", skip_all, fields(slug = %slug))]
    pub async fn insert_app(
        &mut self,
        slug: &AppSlug,
        name: &str,
        description: &str,
    ) -> StoreResult<AppRecord> {
        let record = AppRecord {
            id: new_id(),
            slug: slug.to_string(),
            name: name.to_owned(),
            description: description.to_owned(),
            created_ms: now_ms(),
        };
        sqlx::query(self.sql(
            "INSERT INTO apps (id, slug, name, description, created_ms) VALUES (?, ?, ?, ?, ?)",
        ))
        .bind(&record.id)
        .bind(&record.slug)
        .bind(&record.name)
        .bind(&record.description)
        .bind(record.created_ms)
        .execute(&mut *self.inner)
        .await?;
        Ok(record)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(slug = %slug))]
    pub async fn app_by_slug(&mut self, slug: &str) -> StoreResult<Option<AppRecord>> {
        Ok(sqlx::query_as(
            self.sql("SELECT id, slug, name, description, created_ms FROM apps WHERE slug = ?"),
        )
        .bind(slug)
        .fetch_optional(&mut *self.inner)
        .await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list_apps(&mut self) -> StoreResult<Vec<AppRecord>> {
        Ok(sqlx::query_as(
            self.sql("SELECT id, slug, name, description, created_ms FROM apps ORDER BY slug"),
        )
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// The applications a user is a member of, in any role.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id))]
    pub async fn list_apps_of_user(&mut self, user_id: &str) -> StoreResult<Vec<AppRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT a.id, a.slug, a.name, a.description, a.created_ms FROM apps a \
             JOIN memberships m ON m.app_id = a.id WHERE m.user_id = ? ORDER BY a.slug",
        ))
        .bind(user_id)
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// Every slug of `slugs` that names no application.
    #[tracing::instrument(level = "debug", skip_all, fields(slugs = slugs.len()))]
    pub async fn unknown_slugs(&mut self, slugs: &[AppSlug]) -> StoreResult<Vec<String>> {
        let mut unknown = Vec::new();
        for slug in slugs {
            if self.app_by_slug(slug.as_str()).await?.is_none() {
                unknown.push(slug.to_string());
            }
        }
        Ok(unknown)
    }

    /// Gives the application a new slug, name and description; its id, and so
    /// everything that refers to it by id (policies it owns, keys, members), stays.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id, slug = %slug))]
    pub async fn update_app(
        &mut self,
        app_id: &str,
        slug: &AppSlug,
        name: &str,
        description: &str,
    ) -> StoreResult<()> {
        sqlx::query(self.sql("UPDATE apps SET slug = ?, name = ?, description = ? WHERE id = ?"))
            .bind(slug.as_str())
            .bind(name)
            .bind(description)
            .bind(app_id)
            .execute(&mut *self.inner)
            .await?;
        Ok(())
    }

    /// Deletes an application with its keys and memberships (named here rather than
    /// left to ON DELETE CASCADE, which SQLite honours only with foreign keys on). The
    /// caller makes sure it owns no policy first.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id))]
    pub async fn delete_app(&mut self, app_id: &str) -> StoreResult<()> {
        for query in [
            "DELETE FROM api_keys WHERE app_id = ?",
            "DELETE FROM memberships WHERE app_id = ?",
            "DELETE FROM apps WHERE id = ?",
        ] {
            sqlx::query(self.sql(query))
                .bind(app_id)
                .execute(&mut *self.inner)
                .await?;
        }
        Ok(())
    }

    /// How many policies the application owns.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id))]
    pub async fn count_policies_of_app(&mut self, app_id: &str) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar(self.sql("SELECT COUNT(*) FROM policies WHERE app_id = ?"))
                .bind(app_id)
                .fetch_one(&mut *self.inner)
                .await?,
        )
    }

    /// Locks the application's row until the transaction ends, so that two changes
    /// each checked against its members (the last owner) cannot interleave. SQLite's
    /// write transactions are already serialised.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id))]
    pub async fn lock_app(&mut self, app_id: &str) -> StoreResult<()> {
        if self.backend == super::Backend::Sqlite {
            return Ok(());
        }
        sqlx::query(self.sql("SELECT id FROM apps WHERE id = ? FOR UPDATE"))
            .bind(app_id)
            .fetch_optional(&mut *self.inner)
            .await?;
        Ok(())
    }
}
