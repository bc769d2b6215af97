"""What fails a soak: a grant beyond a bucket's bound, a lost edit, an answer outside a
policy's failure mode, and resources that grow over the second half of the run."""

import collections
import statistics

from limits import allowed, targets

SHORT_WINDOW = 5  # seconds; windows of this length start every second
SQL_GRACE = 5     # seconds after an SQL outage in which an admin 503 is still its doing
KILL_GRACE = 2    # seconds around an instance's kill in which no answer is its doing


def over_admission(grants, faults, started, ended, clock_offset, allow_losses=True):
    """[(window start, length, bucket, grants, bound)] of every window over its bound:
    one-minute windows from the start, and SHORT_WINDOW-second windows every second.
    Without allow_losses the bound is the algorithm's alone: what a window holds beyond
    it is what faults that lost Redis state let buckets grant again.
    A grant counts in [a, b) when it was sent at or after a and answered before b, so it
    was decided within the window; bounds are on Redis' clock (local + clock_offset)."""
    algorithm_of = {t["bucket"]: t["algorithm"] for t in targets()}
    by_bucket = collections.defaultdict(lambda: collections.defaultdict(list))
    for (bucket, sent, answered), n in grants.items():
        by_bucket[bucket][sent].append((answered, n))
    losses = [f for f in faults if f["state_loss"] and allow_losses]
    first, last = int(started) + 1, int(ended)
    windows = [(a, 60) for a in range(first, last - 59, 60)]
    windows += [(a, SHORT_WINDOW) for a in range(first, last - SHORT_WINDOW + 1)]
    over = []
    for bucket, sends in by_bucket.items():
        algorithm = algorithm_of[bucket]
        for a, length in windows:
            b = a + length
            count = sum(n for s in range(a, b) for answered, n in sends.get(s, ())
                        if answered < b)
            if count == 0:
                continue
            bound = allowed(algorithm, a + clock_offset, b + clock_offset)
            bound += sum(allowed(algorithm, f["start"] + clock_offset, f["end"] + 1 + clock_offset)
                         for f in losses if f["start"] - 1 <= b and f["end"] + 1 >= a)
            if count > bound:
                over.append((a, length, bucket, count, bound))
    return over


def odd_answers(odd, faults):
    """Acquire answers outside their policy's failure mode: [(time, why)]. A fail-closed
    policy's 503 never reaches this list (the load counts it); a fail-open one's does."""
    kills = [f for f in faults if f["instance"] is not None]
    wrong = []
    for at, instance, policy, mode, label, excerpt in odd:
        if label == "no answer" and any(
                f["instance"] == instance and f["start"] - KILL_GRACE <= at <= f["end"] + KILL_GRACE
                for f in kills):
            continue
        wrong.append((at, f"instance {instance}, {policy} (fails {mode}): {label} {excerpt}"))
    return wrong


def odd_admin(odd, faults):
    outages = [f for f in faults if f["sql"]]
    kills = [f for f in faults if f["instance"] is not None]
    wrong = []
    for at, instance, action, status, excerpt in odd:
        if status == 503 and any(f["start"] <= at <= f["end"] + SQL_GRACE for f in outages):
            continue
        if status == 0 and any(f["instance"] == instance and
                               f["start"] - KILL_GRACE <= at <= f["end"] + KILL_GRACE
                               for f in kills):
            continue
        wrong.append((at, f"instance {instance}, {action}: {status} {excerpt}"))
    return wrong


# measure -> (slack in its unit, slack as a share of the first value)
GROWTH_SLACK = {"rss_mb": (16.0, 0.2), "fds": (8, 0.0), "redis": (4, 0.0)}


def growth(samples, half_from):
    """Resources that grew over the second half: [(instance, measure, first, last)].
    samples: instance -> [(time, generation, sample)]; an instance restarted in the second
    half is judged from its restart on, if that leaves three samples or more."""
    grown = []
    for instance, series in samples.items():
        late = [(t, g, s) for t, g, s in series if t >= half_from and s]
        if not late:
            continue
        generation = late[-1][1]
        late = [s for t, g, s in late if g == generation]
        if len(late) < 6:
            continue
        for measure, (absolute, share) in GROWTH_SLACK.items():
            first = statistics.median(s[measure] for s in late[:3])
            last = statistics.median(s[measure] for s in late[-3:])
            if last > first + max(absolute, share * first):
                grown.append((instance, measure, first, last))
    return grown


def tightness(grants, started, ended, clock_offset):
    """algorithm -> the busiest bucket's grants over the whole run divided by what the
    algorithm allows over it: near 1 shows the load kept the buckets at their limit, so
    that a grant beyond the bound would have shown."""
    algorithm_of = {t["bucket"]: t["algorithm"] for t in targets()}
    per_bucket = collections.Counter()
    for (bucket, _sent, _answered), n in grants.items():
        per_bucket[bucket] += n
    out = {}
    for bucket, n in per_bucket.items():
        algorithm = algorithm_of[bucket]
        share = n / allowed(algorithm, started + clock_offset, ended + clock_offset)
        out[algorithm] = max(out.get(algorithm, 0), share)
    return out
