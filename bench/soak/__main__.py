"""A soak: three ratekeeper instances on PostgreSQL and a Sentinel-managed Redis under a
steady load of every algorithm and scope, while faults follow one another; a table per
minute, and a verdict.

    python3 bench/soak [--minutes 60] [--rate 1200] [--fault-every 30] [--bin PATH]

Needs redis-server, redis-cli and psql, and a PostgreSQL server (RK_TEST_POSTGRES_URL,
default postgres://postgres@127.0.0.1:5432) on which it creates a database of its own and
drops it at the end. Exit status 1 when the run fails: a grant beyond a bucket's bound, an
acknowledged edit not stored, an acquire answer outside its policy's failure mode (or an
admin error outside an SQL outage), or memory, file descriptors or Redis connections that
grow over the second half of the run. See bench/README.md, "The soak".
"""

import argparse
import collections
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

from admin import Admin
from faults import ORDER, Faults
from load import Load, Tally
from report import during_faults, table
from verdict import growth, odd_admin, odd_answers, over_admission, tightness
from watch import sample
from world import Database, Instances, Redis, redis_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def arguments():
    parser = argparse.ArgumentParser(prog="bench/soak", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--rate", type=float, default=1200, help="acquires a second offered")
    parser.add_argument("--fault-every", type=float, default=30, help="seconds between faults")
    parser.add_argument("--bin", default=os.path.join(ROOT, "target/release/ratekeeper"))
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--down-after-ms", type=int, default=3000,
                        help="the sentinels' down-after-milliseconds")
    return parser.parse_args()


def clock_offset(port):
    """Redis' clock minus ours, in seconds (the scripts take their time from Redis)."""
    before = time.time()
    seconds, micros = redis_cli(port, "time").split()
    after = time.time()
    return int(seconds) + int(micros) / 1e6 - (before + after) / 2


def run_faults(faults, stop, every, until, log):
    turn = 0
    while not stop.wait(every) and time.time() + every < until:
        record = faults.run(ORDER[turn % len(ORDER)])
        turn += 1
        log(f"fault {record['kind']} ({record['note']}): {record['end'] - record['start']:.1f} s")


def run_edits(admin, stop):
    while not stop.wait(2):
        admin.edit()


def main():
    args = arguments()
    # SIGTERM (timeout, CI) unwinds like Ctrl-C: the finally below stops every process
    # and drops the database.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"soak: no {args.bin}: build it first (cargo build --release)")
    directory = tempfile.mkdtemp(prefix="ratekeeper-soak-")
    run_id = os.environ.get("RK_TEST_RUN", str(os.getpid()))
    postgres = os.environ.get("RK_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
    parts = []
    started = time.time()

    def log(text):
        print(f"[{time.time() - started:7.1f} s] {text}", flush=True)

    try:
        redis = Redis(directory, args.down_after_ms)
        parts.append(redis)
        database = Database(directory, postgres, f"rk_test_{run_id}_soak")
        parts.append(database)
        instances = Instances(args.bin, directory, args.instances, database, redis)
        parts.append(instances)
        keys_file = os.path.join(directory, "keys.json")
        admin = Admin(instances, keys_file, started)
        admin.setup()
        offset = clock_offset(redis.master())
        log(f"{args.instances} instances, master {redis.master()}, sentinels {redis.sentinels}; "
            f"Redis' clock {offset * 1000:+.1f} ms from ours; {args.minutes} min")

        started = time.time()
        admin.started = started
        ends = started + args.minutes * 60
        tally = Tally()
        load = Load(started, instances.ports, keys_file, args.rate)
        faults = Faults(redis, database, instances, admin)
        stop = threading.Event()
        # Daemons: a run stopped early (SIGTERM, Ctrl-C) does not wait for them.
        workers = [threading.Thread(target=run_faults, daemon=True,
                                    args=(faults, stop, args.fault_every, ends, log)),
                   threading.Thread(target=run_edits, daemon=True, args=(admin, stop))]
        for w in workers:
            w.start()
        samples = {i: [] for i in range(args.instances)}
        generations = [0] * args.instances
        last_pids = instances.pids()
        edit_checks = {}
        next_sample = time.time()
        minute = 0
        while time.time() < ends:
            load.drain(tally)
            now = time.time()
            if now >= next_sample:
                next_sample += 10
                pids = instances.pids()
                for i, pid in enumerate(pids):
                    if pid != last_pids[i]:
                        generations[i] += 1
                    samples[i].append((now, generations[i],
                                       sample(pid, redis.nodes) if pid else None))
                last_pids = pids
            if now - started >= (minute + 1) * 60:
                edit_checks[minute] = admin.lost_edits()
                answered = sum(n for (m, _, _), n in tally.answers.items() if m == minute)
                log(f"minute {minute}: {answered} acquires answered; lost edits: "
                    f"{edit_checks[minute]}")
                minute += 1
            time.sleep(0.2)
        stop.set()
        for w in workers:
            w.join()
        load.stop(tally)
        ended = time.time()
        final_lost = admin.lost_edits()
        edit_checks[minute] = final_lost

        over = over_admission(tally.grants, faults.done, started, ended, offset)
        wrong_acquires = odd_answers(tally.odd, faults.done)
        wrong_admin = odd_admin(admin.odd, faults.done)
        grown = growth(samples, started + (ended - started) / 2)
        minutes = int((ended - started) // 60) + (1 if (ended - started) % 60 > 1 else 0)
        print()
        print(table(minutes, tally, over, edit_checks, faults.done, samples, started))
        print()
        print("faults (how often, how long; acquires answered during them by status):")
        print(during_faults(faults.done, tally.seconds, ORDER))
        regranted = over_admission(tally.grants, faults.done, started, ended, offset,
                                   allow_losses=False)
        print(f"windows beyond the algorithm's own bound (what faults that lost Redis state "
              f"let buckets grant again): {len(regranted)}, most "
              f"{max((c - b for *_, c, b in regranted), default=0):.0f} grants over")
        print("busiest bucket's grants / bound over the run: " + ", ".join(
            f"{a} {share:.2f}" for a, share in
            sorted(tightness(tally.grants, started, ended, offset).items())))
        print(f"admin answers: {dict(sorted(_by_action(admin.answers).items()))}")
        failures = []
        if over:
            failures.append(f"{len(over)} windows over their bound, e.g. {over[:5]}")
        if final_lost is None:
            failures.append("the edits could not be read back at the end")
        elif final_lost:
            failures.append(f"lost edits: {final_lost}")
        if wrong_acquires:
            failures.append(f"{len(wrong_acquires)} acquire answers outside the failure mode:\n"
                            + summary(wrong_acquires, started))
        if wrong_admin:
            failures.append(f"{len(wrong_admin)} admin answers outside an SQL outage:\n"
                            + summary(wrong_admin, started))
        if grown:
            failures.append(f"grew over the second half: {grown}")
        print("verdict: " + ("passed" if not failures else "FAILED"))
        for failure in failures:
            print("  - " + failure)
        return 1 if failures else 0
    finally:
        for part in reversed(parts):
            try:
                part.stop()
            except Exception as error:  # noqa: BLE001 - stop the others still
                print(f"soak: stopping {type(part).__name__}: {error}", file=sys.stderr)
        if os.environ.get("SOAK_KEEP"):
            print(f"soak: files kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def summary(wrong, started):
    """Odd answers grouped by what they said (instance and policy aside), with when."""
    kinds = collections.defaultdict(list)
    for at, why in wrong:
        kinds[why.split(": ", 1)[-1][:140]].append(at - started)
    return "\n".join(f"      {len(times)} x from {min(times):.1f} s to {max(times):.1f} s: {kind}"
                     for kind, times in sorted(kinds.items(), key=lambda k: -len(k[1]))[:8])


def _by_action(answers):
    out = {}
    for (_minute, action, status), n in answers.items():
        out[f"{action} {status}"] = out.get(f"{action} {status}", 0) + n
    return out


if __name__ == "__main__":
    sys.exit(main())
