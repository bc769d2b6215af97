"""The soak's verdict fails what it should: python3 -m unittest discover -s bench/soak"""

import collections
import unittest

from limits import allowed, targets
from verdict import growth, odd_admin, odd_answers, over_admission

BUCKET = ("token_bucket.global", "", "")  # rate 5/s, 10 at most


def grants(per_second, start, seconds, bucket=BUCKET):
    out = collections.Counter()
    for s in range(start, start + seconds):
        out[(bucket, s, s)] += per_second
    return out


def fault(kind, start, end, state_loss=False, sql=False, instance=None):
    return {"kind": kind, "start": start, "end": end, "state_loss": state_loss, "sql": sql,
            "instance": instance, "note": ""}


class Bounds(unittest.TestCase):
    def test_a_token_bucket_allows_its_burst_and_its_rate(self):
        self.assertEqual(allowed("token_bucket", 100, 105), 10 + 5 * 5)

    def test_a_fixed_window_counts_every_aligned_window_the_span_touches(self):
        self.assertEqual(allowed("fixed_window", 1000, 1005), 20 * 1)   # [1000, 1005)
        self.assertEqual(allowed("fixed_window", 1003, 1008), 20 * 2)

    def test_every_target_names_a_bucket_of_a_known_algorithm(self):
        for target in targets():
            allowed(target["algorithm"], 0, 1)


class OverAdmission(unittest.TestCase):
    def test_grants_at_the_rate_pass(self):
        steady = grants(5, 1001, 120)
        self.assertEqual(over_admission(steady, [], 1000, 1121, 0.0), [])

    def test_grants_beyond_the_bound_fail(self):
        too_many = grants(8, 1001, 120)
        over = over_admission(too_many, [], 1000, 1121, 0.0)
        self.assertTrue(over)
        self.assertTrue(all(bucket == BUCKET for _, _, bucket, _, _ in over))

    def test_a_fault_that_lost_redis_state_allows_a_bucket_again(self):
        steady = grants(5, 1001, 120)
        steady[(BUCKET, 1050, 1050)] += 11  # a full bucket again after a restart, and more
        self.assertTrue(over_admission(steady, [], 1000, 1121, 0.0))
        restart = fault("restart_empty", 1049.5, 1050.5, state_loss=True)
        self.assertEqual(over_admission(steady, [restart], 1000, 1121, 0.0), [])
        stall = fault("stall", 1049.5, 1050.5)
        self.assertTrue(over_admission(steady, [stall], 1000, 1121, 0.0))

    def test_a_grant_answered_after_the_window_is_not_counted_in_it(self):
        late = collections.Counter({(BUCKET, 1001, 1007): 60})
        self.assertEqual(over_admission(late, [], 1000, 1008, 0.0), [])


class Answers(unittest.TestCase):
    def test_no_answer_from_a_killed_instance_is_its_doing(self):
        kill = fault("instance_killed", 100, 102, instance=1)
        odd = [(101, 1, "p", "open", "no answer", ""), (101, 0, "p", "open", "no answer", ""),
               (120, 1, "p", "open", "no answer", ""),
               (50, 2, "p", "open", "503", ""), (51, 2, "p", "closed", "500", "")]
        wrong = odd_answers(odd, [kill])
        self.assertEqual([at for at, _ in wrong], [101, 120, 50, 51])

    def test_an_admin_503_counts_only_during_an_sql_outage(self):
        outage = fault("sql_outage", 100, 108, sql=True)
        odd = [(104, 0, "edit", 503, ""), (112, 0, "edit", 503, ""), (150, 0, "edit", 503, ""),
               (104, 0, "edit", 500, "")]
        self.assertEqual([at for at, _ in odd_admin(odd, [outage])], [150, 104])


class Growth(unittest.TestCase):
    def series(self, rss, generation=0, start=0):
        return [(start + 10 * n, generation, {"rss_mb": r, "fds": 50, "redis": 4})
                for n, r in enumerate(rss)]

    def test_flat_resources_pass(self):
        self.assertEqual(growth({0: self.series([50, 52, 49, 51, 50, 52, 51, 50])}, 0), [])

    def test_memory_that_keeps_growing_fails(self):
        grown = growth({0: self.series([50, 55, 60, 65, 70, 75, 80, 85])}, 0)
        self.assertEqual([(i, m) for i, m, _, _ in grown], [(0, "rss_mb")])

    def test_an_instance_restarted_late_is_judged_from_its_restart(self):
        before = self.series([90, 95, 100], 0)
        after = self.series([50, 51, 50, 52, 51, 50], 1, start=40)
        self.assertEqual(growth({0: before + after}, 0), [])


if __name__ == "__main__":
    unittest.main()
