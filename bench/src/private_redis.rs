//! The run's own Redis, on a free loopback port from 6390 (never the shared 6379), with no
//! persistence, in the temporary directory; and the readings the report takes of it.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use redis::aio::MultiplexedConnection;

use crate::procs::{self, Service, TempDir};

/// The shared Redis' port: never used.
pub const SHARED_PORT: u16 = 6379;

pub struct PrivateRedis {
    pub port: u16,
    pub service: Service,
    conn: MultiplexedConnection,
}

impl PrivateRedis {
    pub async fn start(tmp: &TempDir) -> Result<Self> {
        let port = procs::free_port(6390, SHARED_PORT)?;
        ensure!(port != SHARED_PORT, "refusing to use the shared Redis port");
        crate::log!("starting a private Redis on 127.0.0.1:{port}");
        let mut command = procs::command("redis-server", ["--bind", "127.0.0.1", "--port"]);
        command
            .arg(port.to_string())
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
            ])
            .arg(tmp.path());
        let mut service = Service::start("redis-server", command, &tmp.join("redis.log"))?;
        let url = format!("redis://127.0.0.1:{port}");
        let client = redis::Client::open(url.as_str())?;
        let mut conn = None;
        for _ in 0..100 {
            service.check_alive("during start-up (see redis.log)")?;
            if let Ok(mut c) = client.get_multiplexed_async_connection().await
                && redis::cmd("PING")
                    .query_async::<String>(&mut c)
                    .await
                    .is_ok()
            {
                conn = Some(c);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let conn = conn.context("Redis does not answer PING within 10 s (see redis.log)")?;
        let mut redis = Self {
            port,
            service,
            conn,
        };
        // Make sure the Redis on that port is the one just started (not one that won a race).
        let seen = redis.info_field("server", "process_id").await?;
        ensure!(
            seen == redis.service.pid().to_string(),
            "the Redis on port {port} is not the one this run started (pid {seen}, not {})",
            redis.service.pid()
        );
        Ok(redis)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn conn(&self) -> MultiplexedConnection {
        self.conn.clone()
    }

    async fn info_field(&mut self, section: &str, field: &str) -> Result<String> {
        let info: String = redis::cmd("INFO")
            .arg(section)
            .query_async(&mut self.conn)
            .await?;
        info.lines()
            .find_map(|l| l.trim().strip_prefix(field)?.strip_prefix(':'))
            .map(str::to_owned)
            .with_context(|| format!("no {field} in INFO {section}"))
    }

    pub async fn used_memory(&mut self) -> Option<u64> {
        self.info_field("memory", "used_memory")
            .await
            .ok()?
            .parse()
            .ok()
    }

    pub async fn dbsize(&mut self) -> Option<u64> {
        redis::cmd("DBSIZE").query_async(&mut self.conn).await.ok()
    }

    pub async fn memory_usage(&mut self, key: &str) -> Option<u64> {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query_async(&mut self.conn)
            .await
            .ok()
    }

    /// Every key matching `pattern` (SCAN).
    pub async fn scan(&mut self, pattern: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut self.conn)
                .await
                .with_context(|| format!("SCAN {pattern}"))?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// The mean MEMORY USAGE of the first `n` keys matching `pattern`, and how many.
    pub async fn mean_memory_usage(&mut self, pattern: &str, n: usize) -> Option<(f64, usize)> {
        let keys = self.scan(pattern).await.ok()?;
        let mut total = 0;
        let mut measured = 0;
        for key in keys.iter().take(n) {
            if let Some(bytes) = self.memory_usage(key).await {
                total += bytes;
                measured += 1;
            }
        }
        (measured > 0).then(|| (total as f64 / measured as f64, measured))
    }

    /// A policy's top callers' sorted sets: how many, the largest ZCARD, and their MEMORY
    /// USAGE together.
    pub async fn top_sets(&mut self, prefix: &str, policy: &str) -> TopSets {
        let mut sets = TopSets::default();
        let keys = self
            .scan(&format!("{prefix}:top:{{{policy}}}:*"))
            .await
            .unwrap_or_default();
        for key in keys {
            let card: u64 = redis::cmd("ZCARD")
                .arg(&key)
                .query_async(&mut self.conn)
                .await
                .unwrap_or(0);
            sets.sets += 1;
            sets.largest = sets.largest.max(card);
            sets.bytes += self.memory_usage(&key).await.unwrap_or(0);
        }
        sets
    }

    /// SHUTDOWN NOSAVE, then the process stopped if it still runs.
    pub async fn stop(mut self) {
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            redis::cmd("SHUTDOWN")
                .arg("NOSAVE")
                .query_async::<()>(&mut self.conn),
        )
        .await;
        self.service.stop(Duration::from_secs(5)).await;
    }

    /// Fails when the private Redis has gone.
    pub fn check_alive(&mut self, during: &str) -> Result<()> {
        if let Some(status) = self.service.ended() {
            bail!("the private Redis exited {during} ({status})");
        }
        Ok(())
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct TopSets {
    pub sets: u64,
    pub largest: u64,
    pub bytes: u64,
}
