"""The processes a soak runs: a Sentinel-managed Redis, a database behind a proxy, and the
ratekeeper instances. Every one on a free loopback port, its files in one directory."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
MASTER_NAME = "soak"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet, whatever the way it says so
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {seconds} s")


def redis_cli(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *map(str, args)],
                         capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


class Redis:
    """Two data nodes (a master and its replica) and three sentinels (quorum 2)."""

    def __init__(self, directory, down_after_ms):
        self.directory = directory
        self.nodes = {free_port(): None for _ in range(2)}  # port -> Popen
        self.sentinels = [free_port() for _ in range(3)]
        self.sentinel_procs = []
        self.log = open(os.path.join(directory, "redis.log"), "ab")
        first, second = self.nodes
        self.start_node(first)
        self.start_node(second, replica_of=first)
        for port in self.sentinels:
            conf = os.path.join(directory, f"sentinel-{port}.conf")
            with open(conf, "w") as f:
                f.write(f"port {port}\nbind 127.0.0.1\n"
                        f"sentinel monitor {MASTER_NAME} 127.0.0.1 {first} 2\n"
                        f"sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}\n"
                        f"sentinel failover-timeout {MASTER_NAME} 4000\n")
            self.sentinel_procs.append(subprocess.Popen(
                ["redis-server", conf, "--sentinel"], stdout=self.log, stderr=self.log))
        wait_for("the sentinels", self.settled)

    def url(self):
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER_NAME}"

    def start_node(self, port, replica_of=None):
        node_dir = os.path.join(self.directory, f"redis-{port}")
        os.makedirs(node_dir, exist_ok=True)
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", node_dir]
        if replica_of:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.nodes[port] = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        wait_for(f"redis on {port}", lambda: redis_cli(port, "ping") == "PONG")

    def master(self):
        """The master the sentinels name (the first that answers)."""
        for port in self.sentinels:
            reply = redis_cli(port, "sentinel", "get-master-addr-by-name", MASTER_NAME).split()
            if len(reply) == 2:
                return int(reply[1])
        raise RuntimeError("no sentinel names a master")

    def replica(self):
        return next(p for p in self.nodes if p != self.master())

    def settled(self):
        """The named master has its replica online and every sentinel knows all others."""
        master = self.master()
        if "role:master" not in redis_cli(master, "info", "replication"):
            return False
        if redis_cli(master, "info", "replication").count("state=online") != 1:
            return False
        for port in self.sentinels:
            names = redis_cli(port, "sentinel", "sentinels", MASTER_NAME).split("\n")
            if names.count("name") != 2:
                return False
            if sum(1 for p in self.sentinels if
                   redis_cli(p, "sentinel", "get-master-addr-by-name", MASTER_NAME).endswith(
                       str(master))) != 3:
                return False
        return True

    def kill(self, port):
        proc = self.nodes[port]
        proc.kill()
        proc.wait()

    def signal(self, port, sig):
        self.nodes[port].send_signal(sig)

    def node_pids(self):
        return {port: proc.pid for port, proc in self.nodes.items()}

    def stop(self):
        for proc in [*self.nodes.values(), *self.sentinel_procs]:
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()


class Database:
    """A database of its own on the PostgreSQL server, reached through a proxy that the
    soak can cut off."""

    def __init__(self, directory, server_url, name):
        self.server_url = server_url.rstrip("/")
        self.name = name
        self.psql("-c", f'DROP DATABASE IF EXISTS "{name}"')
        self.psql("-c", f'CREATE DATABASE "{name}"')
        host_port = self.server_url.split("@")[-1].split("/")[0]
        host, port = host_port.split(":") if ":" in host_port else (host_port, "5432")
        self.proxy_port = free_port()
        self.proxy = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "proxy.py"), str(self.proxy_port), host, port],
            stdout=subprocess.PIPE, stderr=open(os.path.join(directory, "proxy.log"), "ab"))
        if self.proxy.stdout.readline().strip() != b"ready":
            raise RuntimeError("the database proxy did not start")
        self.direct_url = f"{self.server_url}/{name}"
        user_part = self.server_url.split("//")[1].split("@")[0]
        self.proxied_url = f"postgres://{user_part}@127.0.0.1:{self.proxy_port}/{name}"

    def psql(self, *args):
        subprocess.run(["psql", "-X", "-q", f"{self.server_url}/postgres", *args],
                       check=True, capture_output=True)

    def cut_off(self):
        self.proxy.send_signal(signal.SIGUSR1)

    def restore(self):
        self.proxy.send_signal(signal.SIGUSR2)

    def stop(self):
        self.proxy.terminate()
        self.proxy.wait()
        self.psql("-c", f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class Instances:
    """COUNT ratekeeper servers on one database and one Redis, each on its own port."""

    def __init__(self, binary, directory, count, database, redis):
        self.binary = binary
        self.directory = directory
        self.env = dict(os.environ,
                        RATEKEEPER_DATABASE_URL=database.proxied_url,
                        RATEKEEPER_REDIS_URL=redis.url(),
                        RATEKEEPER_REDIS_PREFIX="soak",
                        RATEKEEPER_SYNC_INTERVAL_MS="2000",
                        RUST_LOG="warn")
        setup_env = dict(self.env, RATEKEEPER_DATABASE_URL=database.direct_url)
        subprocess.run([binary, "migrate"], env=setup_env, check=True, capture_output=True)
        subprocess.run([binary, "user", "create", "soak", "--admin"], env=setup_env, check=True,
                       input=b"a-password-long-enough\n", capture_output=True)
        out = subprocess.run([binary, "token", "create", "soak"], env=setup_env, check=True,
                             capture_output=True, text=True)
        self.token = out.stdout.strip().split("\n")[-1]
        self.ports = [free_port() for _ in range(count)]
        self.procs = [None] * count
        self.logs = [open(os.path.join(directory, f"instance-{i}.log"), "ab")
                     for i in range(count)]
        for i in range(count):
            self.start(i)

    def api(self, i):
        return f"http://127.0.0.1:{self.ports[i]}"

    def start(self, i):
        env = dict(self.env, RATEKEEPER_LISTEN=f"127.0.0.1:{self.ports[i]}")
        self.procs[i] = subprocess.Popen([self.binary, "serve"], env=env,
                                         stdout=self.logs[i], stderr=self.logs[i])
        wait_for(f"instance {i}", lambda: urllib.request.urlopen(
            self.api(i) + "/healthz", timeout=2).status == 200)

    def kill(self, i):
        self.procs[i].kill()
        self.procs[i].wait()

    def pids(self):
        return [p.pid if p.poll() is None else None for p in self.procs]

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def call(api, method, path, token, body=None, content_type="application/json", timeout=10):
    """One admin API call: (status, parsed JSON or text); status 0 when nothing answered."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(api + path, data=data, method=method, headers={
        "Authorization": "Bearer " + token, "Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode(errors="replace")
    except OSError as error:
        return 0, str(error)
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text
