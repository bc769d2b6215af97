"""The fault schedule: one fault after another, each recorded with its span.

A fault that can lose Redis state (`state_loss`) lets each bucket grant again what the
algorithm allows over the fault's span: a bucket restarted empty or flushed starts full,
and after a failover the old master may have taken writes its replica never got."""

import signal
import time

from world import redis_cli, wait_for

ORDER = ("failover", "sql_outage", "edit_burst", "restart_empty", "instance_killed",
         "file_apply", "stall", "key_rotation", "flushall", "master_killed")


class Faults:
    def __init__(self, redis, database, instances, admin):
        self.redis, self.database, self.instances, self.admin = redis, database, instances, admin
        self.done = []  # {"kind", "start", "end", "state_loss", "sql", "instance", "note"}
        self.killed = 0

    def run(self, kind):
        record = {"kind": kind, "start": time.time(), "state_loss": False, "sql": False,
                  "instance": None, "note": ""}
        record["note"] = getattr(self, kind)(record) or ""
        record["end"] = time.time()
        self.done.append(record)
        return record

    def failover(self, record):
        record["state_loss"] = True
        old = self.redis.master()
        redis_cli(self.redis.sentinels[0], "sentinel", "failover", "soak")
        self.wait_for_master_other_than(old)
        wait_for("the old master to follow", lambda: "role:slave" in redis_cli(old, "info", "replication"))
        # The instances move within their watcher's period after the sentinels do.
        time.sleep(1)
        wait_for("the sentinels to settle", self.redis.settled, 60)
        return f"{old} -> {self.redis.master()}"

    def master_killed(self, record):
        record["state_loss"] = True
        old = self.redis.master()
        self.redis.kill(old)
        new = self.wait_for_master_other_than(old)
        time.sleep(1)
        self.redis.start_node(old, replica_of=new)
        wait_for("the sentinels to settle", self.redis.settled, 60)
        return f"{old} killed -> {new}"

    def restart_empty(self, record):
        record["state_loss"] = True
        port = self.redis.master()
        self.redis.kill(port)
        self.redis.start_node(port)
        wait_for("the replica to sync", self.redis.settled, 60)
        return f"{port}"

    def flushall(self, record):
        record["state_loss"] = True
        redis_cli(self.redis.master(), "flushall")

    def stall(self, record):
        port = self.redis.master()
        self.redis.signal(port, signal.SIGSTOP)
        time.sleep(1.5)
        self.redis.signal(port, signal.SIGCONT)
        return f"{port} stopped 1.5 s"

    def sql_outage(self, record):
        record["sql"] = True
        self.database.cut_off()
        time.sleep(8)
        self.database.restore()
        return "8 s"

    def instance_killed(self, record):
        i = self.killed % len(self.instances.ports)
        self.killed += 1
        record["instance"] = i
        self.admin.down.add(i)
        self.instances.kill(i)
        time.sleep(2)
        self.instances.start(i)
        self.admin.down.discard(i)
        return f"instance {i}"

    def edit_burst(self, record):
        return self.admin.edit_burst(40)

    def file_apply(self, record):
        return self.admin.apply_file()

    def key_rotation(self, record):
        return self.admin.rotate_key()

    def wait_for_master_other_than(self, old):
        found = {}

        def moved():
            found["port"] = self.redis.master()
            return found["port"] != old

        wait_for("a new master", moved, 60)
        return found["port"]
