"""Each instance's resources: resident memory, open file descriptors, and the
connections it holds to Redis' data nodes (its sockets whose peer is one of their ports)."""

import os


def sockets_to(ports):
    """inode -> remote port of every TCP socket on this machine connected to one of ports."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                    if remote_port in ports and fields[3] == "01":  # ESTABLISHED
                        found[fields[9]] = remote_port
        except OSError:
            pass
    return found


def sample(pid, redis_ports):
    """{"rss_mb", "fds", "redis"} of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        links = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                pass
    except (OSError, StopIteration):
        return None
    redis = sockets_to(set(redis_ports))
    held = sum(1 for link in links if link.startswith("socket:[") and link[8:-1] in redis)
    return {"rss_mb": rss_kb / 1024, "fds": len(links), "redis": held}
