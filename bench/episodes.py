"""What the webhooks' episodes cost Redis: crates/limiter/lua/episodes.lua called as each
instance's watcher calls it (members that denied since its last look, in calls of at most
200), on a Redis of the caller's (a key prefix of its own, deleted after).

    python3 bench/episodes.py                  # redis://127.0.0.1:6379
    BENCH_REDIS_URL=redis://host:port python3 bench/episodes.py

Prints, per call size, Redis' own time per call (INFO commandstats, usec_per_call) and per
member, over BENCH_CALLS calls (default 200) of members whose episodes are open (the
common case: a policy that keeps denying), and of members that start one.
"""

import os
import pathlib
import secrets

import redis

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "crates/limiter/lua/episodes.lua"
CALLS = int(os.environ.get("BENCH_CALLS", "200"))


def main():
    r = redis.Redis.from_url(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379"))
    sha = r.script_load(SCRIPT.read_text())
    prefix = f"bench-episodes-{secrets.token_hex(4)}"
    keys = [f"{prefix}:{{notify}}:{k}" for k in ("episodes", "episode_starts", "near_limit")]
    print(f"{'members':>8} {'case':>9} {'us/call':>9} {'us/member':>10}")
    try:
        for members in (1, 10, 50, 200):
            for case in ("starting", "ongoing"):
                r.delete(*keys)
                per_call = []
                for call in range(CALLS):
                    # Starting: new members every call; ongoing: the same ones again.
                    tag = call if case == "starting" else 0
                    args = [members]
                    for i in range(members):
                        args += [f"webhook{i % 4} policy-{tag}-{i}", 3_600_000]
                    args.append(0)
                    r.config_resetstat()
                    r.evalsha(sha, 3, *keys, *args)
                    per_call.append(float(r.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]))
                per_call.sort()
                median = per_call[len(per_call) // 2]
                print(f"{members:>8} {case:>9} {median:>9.1f} {median / members:>10.2f}")
    finally:
        r.delete(*keys)


if __name__ == "__main__":
    main()
