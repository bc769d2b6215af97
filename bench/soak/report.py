"""The per-minute table: answers by status, p99, windows over their bound, edits, faults,
and each instance's memory, file descriptors and Redis connections."""

import collections

from load import latency_of

LABELS = ("200", "200 degraded", "429", "503", "no answer")


def p99(latency, minute):
    counts = sorted((b, n) for (m, b), n in latency.items() if m == minute)
    total = sum(n for _, n in counts)
    if not total:
        return float("nan")
    seen = 0
    for bucket, n in counts:
        seen += n
        if seen >= 0.99 * total:
            return latency_of(bucket) * 1000
    return float("nan")


def table(minutes, tally, over, edit_checks, faults, samples, started):
    by_minute = collections.defaultdict(collections.Counter)
    for (minute, _policy, label), n in tally.answers.items():
        by_minute[minute][label if label in LABELS else "other"] += n
    over_by_minute = collections.Counter(int((a - started) // 60) for a, *_ in over)
    faults_by_minute = collections.defaultdict(list)
    for f in faults:
        faults_by_minute[int((f["start"] - started) // 60)].append(f["kind"])
    instances = sorted(samples)
    head = (f"{'min':>3} {'acquires':>8} {'200':>7} {'degraded':>8} {'429':>7} {'503':>5} "
            f"{'no ans':>6} {'other':>5} {'p99 ms':>6} {'over':>4} {'edits ok':>8} " +
            " ".join(f"{'i' + str(i) + ' MB/fd/redis':>17}" for i in instances) + "  faults")
    rows = [head]
    for minute in range(minutes):
        c = by_minute[minute]
        resources = []
        for i in instances:
            in_minute = [s for t, _g, s in samples[i] if s and int((t - started) // 60) == minute]
            last = in_minute[-1] if in_minute else None
            resources.append(f"{last['rss_mb']:.0f}/{last['fds']}/{last['redis']}"
                             if last else "-")
        check = edit_checks.get(minute)
        edits = "unread" if check is None else ("yes" if not check else f"LOST {len(check)}")
        rows.append(
            f"{minute:>3} {sum(c.values()):>8} {c['200']:>7} {c['200 degraded']:>8} "
            f"{c['429']:>7} {c['503']:>5} {c['no answer']:>6} {c['other']:>5} "
            f"{p99(tally.latency, minute):>6.1f} {over_by_minute[minute]:>4} {edits:>8} " +
            " ".join(f"{r:>17}" for r in resources) + "  " +
            ", ".join(faults_by_minute[minute]))
    return "\n".join(rows)


UNDECIDED = ("200 degraded", "503", "no answer")


def during_faults(faults, seconds, kinds):
    """Per kind of fault: how often, its spans, the acquires answered during them by
    status, and the undecided ones' spread (from the fault's start to the last second in
    which an acquire was not decided by Redis, within the fault's span and 5 s after)."""
    rows = []
    for kind in kinds:
        mine = [f for f in faults if f["kind"] == kind]
        if not mine:
            continue
        labels = collections.Counter()
        windows = []
        for f in mine:
            last = None
            for second in range(int(f["start"]), int(f["end"] + 5) + 1):
                for label in (*LABELS, "other"):
                    n = seconds.get((second, label), 0)
                    if second <= f["end"]:
                        labels[label] += n
                    if n and label in UNDECIDED:
                        last = second + 1 - f["start"]
            windows.append(last)
        spans = [f["end"] - f["start"] for f in mine]
        undecided = [w for w in windows if w is not None]
        spread = (f"undecided up to {min(undecided):.0f}-{max(undecided):.0f} s after it "
                  f"({len(undecided)} of {len(mine)})" if undecided else "every acquire decided")
        counts = ", ".join(f"{label} {n}" for label, n in labels.items() if n)
        rows.append(f"  {kind:<16} {len(mine):>3}x, {min(spans):4.1f}-{max(spans):4.1f} s; "
                    f"{spread}; during: {counts}")
    return "\n".join(rows)
