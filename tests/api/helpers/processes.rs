//! Servers a test runs on ports of its own, to take them down and bring them back: a
//! Redis server (stalled, stopped, started again), a local Redis Cluster, a master with a
//! replica watched by three sentinels, and a TCP proxy in front of a database (cut and
//! restored). Never the shared services.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::eventually;
use super::services::fresh_dir;

/// A loopback port nothing listens on (at the moment of asking).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn answers_ping(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return false;
    };
    redis::cmd("PING")
        .query_async::<String>(&mut conn)
        .await
        .is_ok()
}

/// A Redis server of the test's own on a TCP port of its own, without persistence: the
/// test can stall it (SIGSTOP: connections stay open, nothing answers), stop it, and
/// start it again on the same port, empty, as a restart without persistence leaves it.
pub struct RedisProcess {
    child: Option<Child>,
    pub port: u16,
}

impl RedisProcess {
    pub async fn start() -> Self {
        let mut me = Self {
            child: None,
            port: free_port(),
        };
        me.start_again().await;
        me
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub async fn start_again(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (scripts/services.sh installs it)");
        self.child = Some(child);
        let url = self.url();
        let up = eventually(Duration::from_secs(10), || answers_ping(&url)).await;
        assert!(up, "redis on port {} did not start", self.port);
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            self.signal("CONT");
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server: it keeps its connections and answers nothing.
    pub fn stall(&self) {
        self.signal("STOP");
    }

    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let status = Command::new("kill")
                .args([&format!("-{signal}"), &child.id().to_string()])
                .status()
                .expect("kill");
            assert!(status.success(), "kill -{signal}");
        }
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Three cluster masters on ports of their own (each port + 10000 is its bus port),
/// killed on drop.
pub struct LocalCluster {
    nodes: Vec<Child>,
    ports: Vec<u16>,
    dir: std::path::PathBuf,
}

fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

impl LocalCluster {
    /// Three ports for a cluster not started yet.
    pub fn free_ports() -> Vec<u16> {
        (0..3).map(|_| free_cluster_port()).collect()
    }

    /// The `RATEKEEPER_REDIS_URL` of a cluster on `ports`.
    pub fn url_of(ports: &[u16]) -> String {
        ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub async fn start() -> Self {
        Self::start_on(Self::free_ports()).await
    }

    pub async fn start_on(ports: Vec<u16>) -> Self {
        let dir = fresh_dir("cluster");
        let nodes = ports
            .iter()
            .map(|port| {
                Command::new("redis-server")
                    .args([
                        "--port",
                        &port.to_string(),
                        "--bind",
                        "127.0.0.1",
                        "--cluster-enabled",
                        "yes",
                    ])
                    .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
                    .args(["--save", "", "--appendonly", "no"])
                    .current_dir(&dir)
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("redis-server")
            })
            .collect();
        let cluster = Self { nodes, ports, dir };
        for port in &cluster.ports {
            let url = format!("redis://127.0.0.1:{port}");
            let up = eventually(Duration::from_secs(10), || answers_ping(&url)).await;
            assert!(up, "cluster node {port} did not start");
        }
        let addrs: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // Wait until every node reports the cluster healthy.
        for port in &cluster.ports {
            let ok = eventually(Duration::from_secs(15), || async move {
                let out = Command::new("redis-cli")
                    .args(["-p", &port.to_string(), "cluster", "info"])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).contains("cluster_state:ok")
            })
            .await;
            assert!(ok, "cluster not ok on {port}");
        }
        cluster
    }

    pub fn url(&self) -> String {
        Self::url_of(&self.ports)
    }

    pub fn ports(&self) -> &[u16] {
        &self.ports
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis master with one replica, watched by three sentinels (quorum 2, the master
/// down after 1 s unanswered), all on ports of their own, killed on drop.
pub struct LocalSentinel {
    /// The master's and the replica's ports, in the order they started.
    pub data_ports: [u16; 2],
    pub sentinel_ports: [u16; 3],
    children: Vec<Child>,
    dir: std::path::PathBuf,
}

pub const SENTINEL_MASTER: &str = "rkmaster";

/// What `redis-cli -p <port> <args>` prints.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl LocalSentinel {
    pub async fn start() -> Self {
        let dir = fresh_dir("sentinel");
        let data_ports = [free_port(), free_port()];
        let sentinel_ports = [free_port(), free_port(), free_port()];
        let mut children = Vec::new();
        for (i, port) in data_ports.iter().enumerate() {
            let mut command = Command::new("redis-server");
            command
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .current_dir(&dir)
                .stdout(Stdio::null());
            if i == 1 {
                command.args(["--replicaof", "127.0.0.1", &data_ports[0].to_string()]);
            }
            children.push(command.spawn().expect("redis-server"));
        }
        for port in sentinel_ports {
            let config = dir.join(format!("sentinel-{port}.conf"));
            std::fs::write(
                &config,
                format!(
                    "port {port}\nbind 127.0.0.1\n\
                     sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {} 2\n\
                     sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
                     sentinel failover-timeout {SENTINEL_MASTER} 2000\n",
                    data_ports[0]
                ),
            )
            .expect("sentinel config");
            children.push(
                Command::new("redis-server")
                    .arg(&config)
                    .arg("--sentinel")
                    .current_dir(&dir)
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("redis-server --sentinel"),
            );
        }
        let this = Self {
            data_ports,
            sentinel_ports,
            children,
            dir,
        };
        // Ready for a failover: the replica in sync, and every sentinel knowing it and
        // the two other sentinels.
        let master = data_ports[0];
        let synced = eventually(Duration::from_secs(20), || async move {
            redis_cli(master, &["info", "replication"]).contains("state=online")
        })
        .await;
        assert!(synced, "the replica did not sync");
        for port in sentinel_ports {
            let ready = eventually(Duration::from_secs(30), || async move {
                let replicas = redis_cli(port, &["sentinel", "replicas", SENTINEL_MASTER]);
                let sentinels = redis_cli(port, &["sentinel", "sentinels", SENTINEL_MASTER]);
                replicas.contains("slave")
                    && sentinels.lines().filter(|l| *l == "name").count() == 2
            })
            .await;
            assert!(
                ready,
                "sentinel {port} does not know the replica and its peers"
            );
        }
        this
    }

    /// The `RATEKEEPER_REDIS_URL` of this master behind its sentinels.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinel_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+sentinel://{}/{SENTINEL_MASTER}", hosts.join(","))
    }

    /// The port of the master the sentinels name now.
    pub fn master_port(&self) -> u16 {
        let out = redis_cli(
            self.sentinel_ports[0],
            &["sentinel", "get-master-addr-by-name", SENTINEL_MASTER],
        );
        out.lines()
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
            .expect("the sentinels name a master")
    }

    /// Asks the sentinels for a failover (the replica promoted, the master demoted) and
    /// waits until every one of them names the new master; its port.
    pub async fn fail_over(&self) -> u16 {
        let before = self.master_port();
        let answer = redis_cli(
            self.sentinel_ports[0],
            &["sentinel", "failover", SENTINEL_MASTER],
        );
        assert!(answer.contains("OK"), "sentinel failover: {answer}");
        self.wait_for_master_other_than(before).await
    }

    /// Waits until every sentinel names a master other than `old`, and that master says
    /// it is one; its port.
    pub async fn wait_for_master_other_than(&self, old: u16) -> u16 {
        let ports = self.sentinel_ports;
        let moved = eventually(Duration::from_secs(60), || async move {
            ports.iter().all(|port| {
                let out = redis_cli(
                    *port,
                    &["sentinel", "get-master-addr-by-name", SENTINEL_MASTER],
                );
                out.lines()
                    .nth(1)
                    .and_then(|p| p.trim().parse::<u16>().ok())
                    .is_some_and(|p| p != old && redis_cli(p, &["role"]).starts_with("master"))
            })
        })
        .await;
        assert!(moved, "no failover away from {old}");
        self.master_port()
    }

    /// Kills the data node on `port` (its process, as a crash would).
    pub fn kill_data_node(&mut self, port: u16) {
        let index = self
            .data_ports
            .iter()
            .position(|p| *p == port)
            .expect("a data port");
        let child = &mut self.children[index];
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for LocalSentinel {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TCP proxy on a port of its own in front of a server (a database): `cut` closes every
/// connection through it and refuses new ones, as a network partition or a stopped
/// server would; `restore` listens again on the same port.
pub struct TcpProxy {
    pub port: u16,
    target: SocketAddr,
    listener: Option<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl TcpProxy {
    pub async fn start(target: SocketAddr) -> Self {
        let mut proxy = Self {
            port: free_port(),
            target,
            listener: None,
            connections: Arc::default(),
        };
        proxy.restore().await;
        proxy
    }

    /// A proxy in front of the database of `url`, and the URL that reaches the same
    /// database through it.
    pub async fn in_front_of_database(url: &str) -> (Self, String) {
        let mut through = url::Url::parse(url).unwrap();
        let target = (through.host_str().unwrap(), through.port().unwrap_or(5432))
            .to_socket_addrs()
            .unwrap()
            .next()
            .unwrap();
        let proxy = Self::start(target).await;
        through.set_host(Some("127.0.0.1")).unwrap();
        through.set_port(Some(proxy.port)).unwrap();
        (proxy, through.into())
    }

    pub async fn restore(&mut self) {
        assert!(self.listener.is_none(), "already listening");
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("the proxy's port is free again");
        let (target, connections) = (self.target, self.connections.clone());
        self.listener = Some(tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let pipe = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                connections.lock().unwrap().push(pipe);
            }
        }));
    }

    /// Every connection through the proxy closed, new ones refused.
    pub async fn cut(&mut self) {
        if let Some(listener) = self.listener.take() {
            listener.abort();
            let _ = listener.await;
        }
        let pipes: Vec<JoinHandle<()>> = self.connections.lock().unwrap().drain(..).collect();
        for pipe in pipes {
            pipe.abort();
            let _ = pipe.await;
        }
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        if let Some(listener) = &self.listener {
            listener.abort();
        }
        for pipe in self.connections.lock().unwrap().iter() {
            pipe.abort();
        }
    }
}
