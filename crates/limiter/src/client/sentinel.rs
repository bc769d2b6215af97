//! Redis behind Sentinel: `redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/
//! <master name>[/<db>]` (port 26379 by default; the credentials and the database are the
//! master's). The master is found by asking the sentinels at the first call, and again
//! after a call finds its connection lost or its node no longer the master (a failover:
//! the old master is gone, or now a replica that refuses writes), or after the sentinels
//! are seen to name another master (each connection asks them every [`WATCH_EVERY`]: a
//! demoted master may take writes for a while before it is told it is a replica, and
//! those would be lost), so every part of the server that holds a connection follows a
//! failover by itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use arc_swap::ArcSwapOption;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ErrorKind, RedisConnectionInfo, RedisError, RedisResult};
use tokio::time::Instant;

const SCHEME: &str = "redis+sentinel://";
const DEFAULT_PORT: u16 = 26379;
/// After a failed search for the master, calls fail at once for this long instead of each
/// asking the sentinels again (under load, a failover would otherwise flood them).
const RETRY_SEARCH_AFTER: Duration = Duration::from_millis(200);
/// How often a connection asks the sentinels which master they name.
pub const WATCH_EVERY: Duration = Duration::from_millis(500);

/// Whether `url` names Redis behind Sentinel.
pub fn is_sentinel_url(url: &str) -> bool {
    url.trim_start().starts_with(SCHEME)
}

/// A parsed `redis+sentinel://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelUrl {
    pub sentinels: Vec<(String, u16)>,
    pub master: String,
    username: Option<String>,
    password: Option<String>,
    db: i64,
}

impl SentinelUrl {
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let rest = url
            .trim()
            .strip_prefix(SCHEME)
            .with_context(|| format!("a sentinel URL starts with {SCHEME}"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (credentials, hosts) = match authority.rsplit_once('@') {
            Some((credentials, hosts)) => (Some(credentials), hosts),
            None => (None, authority),
        };
        let (username, password) = match credentials {
            None => (None, None),
            Some(c) => {
                let (user, password) = c.split_once(':').unwrap_or((c, ""));
                let decode = |s: &str| -> anyhow::Result<Option<String>> {
                    if s.is_empty() {
                        return Ok(None);
                    }
                    let decoded = percent_decode(s).context("a bad %-escape in the credentials")?;
                    Ok(Some(decoded))
                };
                (decode(user)?, decode(password)?)
            }
        };
        let mut sentinels = Vec::new();
        for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            let (name, port) = match host.rsplit_once(':') {
                Some((name, port)) => (
                    name,
                    port.parse::<u16>()
                        .ok()
                        .filter(|p| *p > 0)
                        .with_context(|| format!("sentinel {host:?}: the port is not 1-65535"))?,
                ),
                None => (host, DEFAULT_PORT),
            };
            if name.is_empty() {
                bail!("sentinel {host:?}: no host name");
            }
            sentinels.push((name.to_owned(), port));
        }
        if sentinels.is_empty() {
            bail!("a sentinel URL names at least one sentinel: {SCHEME}host:26379/<master name>");
        }
        let mut segments = path.split('/');
        let master = segments.next().unwrap_or_default();
        if master.is_empty() {
            bail!("a sentinel URL ends with the master's name: {SCHEME}host:26379/<master name>");
        }
        let db = match segments.next() {
            None | Some("") => 0,
            Some(db) => db
                .parse::<i64>()
                .ok()
                .filter(|db| *db >= 0)
                .with_context(|| format!("the database {db:?} is not a number"))?,
        };
        if segments.next().is_some() {
            bail!("a sentinel URL has no path after /<master name>/<db>");
        }
        Ok(Self {
            sentinels,
            master: master.to_owned(),
            username,
            password,
            db,
        })
    }

    /// The URL as a message may show it: no password.
    pub fn shown(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(host, port)| format!("{host}:{port}"))
            .collect();
        let credentials = match (&self.username, &self.password) {
            (_, Some(_)) => format!("{}:***@", self.username.as_deref().unwrap_or_default()),
            (Some(user), None) => format!("{user}@"),
            (None, None) => String::new(),
        };
        format!("{SCHEME}{credentials}{}/{}", hosts.join(","), self.master)
    }

    /// A client of the master the sentinels name now (for a subscription of its own).
    pub async fn master_client(&self) -> RedisResult<redis::Client> {
        self.client()?.async_get_client().await
    }

    fn client(&self) -> RedisResult<SentinelClient> {
        let mut master = RedisConnectionInfo::default().set_db(self.db);
        if let Some(user) = &self.username {
            master = master.set_username(user);
        }
        if let Some(password) = &self.password {
            master = master.set_password(password);
        }
        let sentinels: Vec<String> = self
            .sentinels
            .iter()
            .map(|(host, port)| format!("redis://{host}:{port}"))
            .collect();
        SentinelClient::build(
            sentinels,
            self.master.clone(),
            Some(SentinelNodeConnectionInfo::default().set_redis_connection_info(master)),
            SentinelServerType::Master,
        )
    }
}

/// `%XX` escapes decoded (credentials in a URL carry them for `@`, `:` and `/`).
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The connection to the master the sentinels name now, found again after a failover.
pub struct SentinelConn {
    url: SentinelUrl,
    sentinel: tokio::sync::Mutex<Search>,
    config: ConnectionManagerConfig,
    /// How long a search for the master may take.
    search_timeout: Duration,
    /// The master's connection, its generation (which connection a failed call used) and
    /// its address (`host:port`, as the sentinels name it).
    current: ArcSwapOption<(u64, ConnectionManager, String)>,
    generation: AtomicU64,
}

/// The sentinel client and when its last search for the master failed.
struct Search {
    client: SentinelClient,
    failed_at: Option<Instant>,
}

impl SentinelConn {
    pub fn new(
        url: &str,
        config: ConnectionManagerConfig,
        search_timeout: Duration,
    ) -> anyhow::Result<Arc<Self>> {
        let url = SentinelUrl::parse(url)?;
        let client = url.client().context("invalid sentinel URL")?;
        let conn = Arc::new(Self {
            url,
            sentinel: tokio::sync::Mutex::new(Search {
                client,
                failed_at: None,
            }),
            config,
            search_timeout,
            current: ArcSwapOption::empty(),
            generation: AtomicU64::new(0),
        });
        // Watched from the runtime that made it, for as long as it is used.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(watch(Arc::downgrade(&conn)));
        }
        Ok(conn)
    }

    pub fn shown(&self) -> String {
        self.url.shown()
    }

    /// The master's connection, found through the sentinels when there is none.
    pub async fn get(&self) -> RedisResult<(u64, ConnectionManager)> {
        if let Some(current) = self.current.load_full() {
            return Ok((current.0, current.1.clone()));
        }
        let mut search = self.sentinel.lock().await;
        if let Some(current) = self.current.load_full() {
            return Ok((current.0, current.1.clone()));
        }
        if let Some(at) = search.failed_at
            && at.elapsed() < RETRY_SEARCH_AFTER
        {
            return Err(no_master(
                &self.url.master,
                "the last search failed a moment ago",
            ));
        }
        let found =
            tokio::time::timeout(self.search_timeout, search.client.async_get_client()).await;
        let client = match found {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                search.failed_at = Some(Instant::now());
                return Err(e);
            }
            Err(_) => {
                search.failed_at = Some(Instant::now());
                return Err(no_master(
                    &self.url.master,
                    "the sentinels did not answer in time",
                ));
            }
        };
        search.failed_at = None;
        let address = client.get_connection_info().addr().to_string();
        let manager = ConnectionManager::new_lazy_with_config(client, self.config.clone())?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.current
            .store(Some(Arc::new((generation, manager.clone(), address))));
        Ok((generation, manager))
    }

    /// Drops the connection of `generation` after a call on it failed in a way that says
    /// the master may have moved: the next call asks the sentinels.
    pub fn forget(&self, generation: u64) {
        let current = self.current.load();
        if current.as_ref().is_some_and(|c| c.0 == generation) {
            self.current.store(None);
        }
    }
}

/// Asks the sentinels every [`WATCH_EVERY`] which master they name, and drops the
/// connection when it is to another; ends when the connection is no longer used.
async fn watch(conn: std::sync::Weak<SentinelConn>) {
    let mut asked: Option<(usize, redis::aio::MultiplexedConnection)> = None;
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(conn) = conn.upgrade() else {
            return;
        };
        let Some(current) = conn.current.load_full() else {
            continue;
        };
        match named_master(&conn.url, &mut asked, conn.search_timeout).await {
            Some(named) if named != current.2 => {
                tracing::warn!(
                    redis = %conn.url.shown(),
                    from = %current.2,
                    to = %named,
                    "the sentinels name another master; moving to it"
                );
                conn.forget(current.0);
            }
            _ => {}
        }
    }
}

/// The master (`host:port`) the first sentinel that answers names, keeping a connection
/// to it in `asked` for the next time; `None` when none answers.
async fn named_master(
    url: &SentinelUrl,
    asked: &mut Option<(usize, redis::aio::MultiplexedConnection)>,
    timeout: Duration,
) -> Option<String> {
    let first = asked.as_ref().map_or(0, |(i, _)| *i);
    for offset in 0..url.sentinels.len() {
        let i = (first + offset) % url.sentinels.len();
        if asked.as_ref().is_none_or(|(at, _)| *at != i) {
            let (host, port) = &url.sentinels[i];
            let Ok(client) = redis::Client::open(format!("redis://{host}:{port}")) else {
                continue;
            };
            match tokio::time::timeout(timeout, client.get_multiplexed_async_connection()).await {
                Ok(Ok(c)) => *asked = Some((i, c)),
                _ => continue,
            }
        }
        let Some((_, c)) = asked.as_mut() else {
            continue;
        };
        let mut ask = redis::cmd("SENTINEL");
        ask.arg("get-master-addr-by-name").arg(&url.master);
        match tokio::time::timeout(timeout, ask.query_async::<Option<(String, u16)>>(c)).await {
            Ok(Ok(Some((host, port)))) => return Some(format!("{host}:{port}")),
            _ => *asked = None,
        }
    }
    None
}

/// Whether a failed call says the master may have moved: its connection is gone, or the
/// node it reached is a replica now (it refuses writes).
pub fn master_may_have_moved(e: &RedisError) -> bool {
    e.is_unrecoverable_error()
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.code() == Some("READONLY")
}

fn no_master(name: &str, why: &str) -> RedisError {
    RedisError::from((
        ErrorKind::Io,
        "no master found through the sentinels",
        format!("{name}: {why}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_its_sentinels_master_credentials_and_database() {
        let url = SentinelUrl::parse("redis+sentinel://:s%40cret@h1:26380,h2,10.0.0.3:1/cache/2")
            .unwrap();
        assert_eq!(
            url.sentinels,
            [
                ("h1".to_owned(), 26380),
                ("h2".to_owned(), 26379),
                ("10.0.0.3".to_owned(), 1)
            ]
        );
        assert_eq!(url.master, "cache");
        assert_eq!(url.password.as_deref(), Some("s@cret"));
        assert_eq!(url.username, None);
        assert_eq!(url.db, 2);
        assert_eq!(
            url.shown(),
            "redis+sentinel://:***@h1:26380,h2:26379,10.0.0.3:1/cache"
        );
    }

    #[test]
    fn a_bad_url_is_refused_with_what_is_wrong() {
        for (url, says) in [
            ("redis+sentinel:///m", "at least one sentinel"),
            ("redis+sentinel://h1:26379", "the master's name"),
            ("redis+sentinel://h1:26379/", "the master's name"),
            ("redis+sentinel://h1:0/m", "not 1-65535"),
            ("redis+sentinel://h1:x/m", "not 1-65535"),
            ("redis+sentinel://:26379/m", "no host name"),
            ("redis+sentinel://h1/m/db", "not a number"),
            ("redis+sentinel://h1/m/1/x", "no path after"),
            ("redis+sentinel://:%zz@h1/m", "%-escape"),
        ] {
            let error = format!("{:#}", SentinelUrl::parse(url).unwrap_err());
            assert!(error.contains(says), "{url}: {error}");
        }
    }
}
