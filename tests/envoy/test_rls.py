"""ratekeeper's Envoy rate limit service, asked by a client no one here wrote: Envoy's own
messages from PyPI's envoy-data-plane (betterproto2), sent over grpcio.

Run by scripts/envoy_client.sh, which starts the server and passes in the environment:
RK_GRPC (host:port of the rate limit service), RK_HTTP (the HTTP API's base URL),
RK_KEY (an API key of the app "shop"), RK_OTHER_KEY (one of the app "other"), and the
policies it made: py.generic (0.5/s, 2 permits), py.resource (1/s, 10), py.hits
(0.001/s, 100), py.keyed and py.shared (per_key, 0.001/s, 5), py.burst (0.001/s, 5)
and py.daily (0.001/s, 1), and envoyproxy/ratelimit's Examples 3 and 7 as import-envoy
makes them, in those examples' domains: py.per-ip (per_key on `remote_address`, 3) beside
py.blocked-ip (mode block on `remote_address=50.0.0.5`), and py.specific (1 permit)
replaced by py.replacing (10); all of "shop".

The generated sync stub sends no metadata, so the API key goes with the call the stub
makes itself: channel.unary_unary(path, serializer, deserializer)(msg, metadata=...).
"""

import datetime
import json
import os
import sys
import unittest
import urllib.error
import urllib.request

import grpc
from envoy_data_plane.envoy.extensions.common.ratelimit.v3 import (
    RateLimitDescriptor,
    RateLimitDescriptorEntry,
)
from envoy_data_plane.envoy.service.ratelimit.v3 import (
    RateLimitRequest,
    RateLimitResponse,
    RateLimitResponseCode,
    RateLimitResponseRateLimitUnit,
)

GRPC = os.environ["RK_GRPC"]
HTTP = os.environ["RK_HTTP"]
KEY = os.environ["RK_KEY"]
OTHER_KEY = os.environ["RK_OTHER_KEY"]
METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

channel = grpc.insecure_channel(GRPC)
should_rate_limit = channel.unary_unary(
    METHOD,
    request_serializer=RateLimitRequest.SerializeToString,
    response_deserializer=RateLimitResponse.FromString,
)


def descriptor(*entries, hits=None):
    """A descriptor of (key, value) entries, with hits of its own when given."""
    return RateLimitDescriptor(
        entries=[RateLimitDescriptorEntry(key=k, value=v) for k, v in entries],
        hits_addend=hits,
    )


def ask(*descriptors, key=KEY, hits_addend=0, domain="edge"):
    """ShouldRateLimit with the API key in the metadata, as Envoy's initial_metadata."""
    metadata = [("authorization", f"Bearer {key}")] if key is not None else []
    request = RateLimitRequest(
        domain=domain, descriptors=list(descriptors), hits_addend=hits_addend
    )
    return should_rate_limit(request, metadata=metadata, timeout=30)


def header(reply, name):
    for h in reply.response_headers_to_add:
        if h.key.lower() == name:
            return h.value
    return None


def http_acquire(resource, key, permits=1):
    """POST /v1/acquire of a per_key policy's bucket (permits 0: a check): (status, body)."""
    item = {"resource": resource, "permits": permits}
    if key is not None:
        item["key"] = key
    request = urllib.request.Request(
        f"{HTTP}/v1/acquire",
        data=json.dumps(item).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


class Conventions(unittest.TestCase):
    def test_generic_key_names_a_policy_and_the_status_tells_its_limit(self):
        reply = ask(descriptor(("generic_key", "py.generic")))
        self.assertEqual(reply.overall_code, RateLimitResponseCode.OK)
        (status,) = reply.statuses
        self.assertEqual(status.code, RateLimitResponseCode.OK)
        self.assertEqual(status.current_limit.name, "py.generic")
        # 0.5 per second: 30 per minute, the smallest unit where it is whole.
        self.assertEqual(status.current_limit.requests_per_unit, 30)
        self.assertEqual(status.current_limit.unit, RateLimitResponseRateLimitUnit.MINUTE)
        self.assertEqual(status.limit_remaining, 1)
        self.assertEqual(header(reply, "ratelimit-policy"), '"py.generic";q=2')
        self.assertTrue(header(reply, "ratelimit").startswith('"py.generic";r=1;t='))

        ask(descriptor(("generic_key", "py.generic")))
        over = ask(descriptor(("generic_key", "py.generic")))
        self.assertEqual(over.overall_code, RateLimitResponseCode.OVER_LIMIT)
        self.assertEqual(over.statuses[0].code, RateLimitResponseCode.OVER_LIMIT)
        self.assertEqual(over.statuses[0].limit_remaining, 0)
        reset = over.statuses[0].duration_until_reset
        self.assertGreater(reset, datetime.timedelta(0))
        self.assertLessEqual(reset, datetime.timedelta(seconds=2))
        self.assertIn(header(over, "retry-after"), ("1", "2"))

    def test_resource_names_a_policy_too(self):
        reply = ask(descriptor(("resource", "py.resource")))
        self.assertEqual(reply.statuses[0].current_limit.name, "py.resource")
        self.assertEqual(reply.statuses[0].current_limit.requests_per_unit, 1)
        self.assertEqual(
            reply.statuses[0].current_limit.unit, RateLimitResponseRateLimitUnit.SECOND
        )
        self.assertEqual(reply.statuses[0].limit_remaining, 9)

    def test_a_descriptor_naming_no_policy_is_ok_without_a_limit(self):
        reply = ask(
            descriptor(("remote_address", "10.0.0.1")),
            descriptor(("generic_key", "no.such.policy")),
        )
        self.assertEqual(reply.overall_code, RateLimitResponseCode.OK)
        self.assertEqual(len(reply.statuses), 2)
        for status in reply.statuses:
            self.assertEqual(status.code, RateLimitResponseCode.OK)
            self.assertIsNone(status.current_limit)

    def test_a_descriptors_hits_addend_wins_over_the_requests(self):
        reply = ask(descriptor(("generic_key", "py.hits")), hits_addend=5)
        self.assertEqual(reply.statuses[0].limit_remaining, 95)
        reply = ask(descriptor(("generic_key", "py.hits"), hits=10), hits_addend=5)
        self.assertEqual(reply.statuses[0].limit_remaining, 85)
        # The request's 0 is proto3's unset: one hit, as Envoy means it.
        reply = ask(descriptor(("generic_key", "py.hits")), hits_addend=0)
        self.assertEqual(reply.statuses[0].limit_remaining, 84)

    def test_extra_entries_on_a_policy_that_is_not_per_key_are_invalid(self):
        with self.assertRaises(grpc.RpcError) as refused:
            ask(descriptor(("remote_address", "x")), descriptor(("generic_key", "py.resource"), ("user", "ann")))
        self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("descriptors[1]", refused.exception.details())


class PerKeyBuckets(unittest.TestCase):
    def test_the_other_entries_joined_with_a_bar_are_the_bucket_key(self):
        reply = ask(descriptor(("generic_key", "py.keyed"), ("tenant", "acme"), ("user", "bob"), hits=2))
        self.assertEqual(reply.statuses[0].limit_remaining, 3)
        self.assertTrue(header(reply, "ratelimit").endswith(";pk=:YWNtZXxib2I=:"))
        status, body = http_acquire("py.keyed", "acme|bob")
        self.assertEqual((status, body["remaining"]), (200, 2))

    def test_grpc_and_http_take_from_the_same_bucket(self):
        status, body = http_acquire("py.shared", "carol")
        self.assertEqual((status, body["remaining"]), (200, 4))
        reply = ask(descriptor(("generic_key", "py.shared"), ("user", "carol")))
        self.assertEqual(reply.statuses[0].limit_remaining, 3)
        status, body = http_acquire("py.shared", "carol")
        self.assertEqual((status, body["remaining"]), (200, 2))


class Auth(unittest.TestCase):
    def test_a_missing_key_is_unauthenticated(self):
        with self.assertRaises(grpc.RpcError) as refused:
            ask(descriptor(("generic_key", "py.resource")), key=None)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_a_bad_key_is_unauthenticated(self):
        with self.assertRaises(grpc.RpcError) as refused:
            ask(descriptor(("generic_key", "py.resource")), key="rk_key_nope")
        self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn("unknown or revoked", refused.exception.details())

    def test_an_app_the_policy_does_not_allow_is_permission_denied(self):
        with self.assertRaises(grpc.RpcError) as refused:
            ask(descriptor(("generic_key", "py.resource")), key=OTHER_KEY)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn('"py.resource"', refused.exception.details())



def http_check(resource, key=None):
    """POST /v1/acquire of 0 permits (a check, nothing taken): (status, body)."""
    return http_acquire(resource, key, permits=0)


class AllOrNothing(unittest.TestCase):
    """py.burst (5 permits) and py.daily (1 permit), neither refilling during the test."""

    def test_several_descriptors_are_decided_all_or_nothing(self):
        both = (
            descriptor(("generic_key", "py.burst")),
            descriptor(("generic_key", "py.daily")),
        )
        granted = ask(*both)
        self.assertEqual(granted.overall_code, RateLimitResponseCode.OK)
        self.assertEqual([s.limit_remaining for s in granted.statuses], [4, 0])
        denied = ask(*both)
        self.assertEqual(denied.overall_code, RateLimitResponseCode.OVER_LIMIT)
        self.assertEqual(
            [s.code for s in denied.statuses],
            [RateLimitResponseCode.OK, RateLimitResponseCode.OVER_LIMIT],
        )
        # Nothing was taken from py.burst by the denied call: HTTP sees 4 left.
        status, body = http_check("py.burst")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["remaining"], 4, body)

    def test_hits_addend_zero_is_a_check_that_takes_nothing(self):
        for _ in range(3):
            reply = ask(descriptor(("generic_key", "py.hits"), hits=0))
            self.assertEqual(reply.overall_code, RateLimitResponseCode.OK)
        status, body = http_check("py.hits")
        self.assertEqual(status, 200, body)
        first = body["remaining"]
        ask(descriptor(("generic_key", "py.hits"), hits=0))
        self.assertEqual(http_check("py.hits")[1]["remaining"], first)


class ImportedExamples(unittest.TestCase):
    """envoyproxy/ratelimit's Example 3 (a limit of 0) and Example 7 (`replaces`), each
    asked in its own domain."""

    def test_a_blocked_value_is_over_the_limit_with_a_limit_of_zero(self):
        other = ask(descriptor(("remote_address", "50.0.0.1")), domain="edge_proxy_per_ip")
        self.assertEqual(other.overall_code, RateLimitResponseCode.OK)
        self.assertEqual(other.statuses[0].current_limit.name, "py.per-ip")
        blocked = ask(descriptor(("remote_address", "50.0.0.5")), domain="edge_proxy_per_ip")
        self.assertEqual(blocked.overall_code, RateLimitResponseCode.OVER_LIMIT)
        limit = blocked.statuses[0].current_limit
        self.assertEqual((limit.name, limit.requests_per_unit), ("py.blocked-ip", 0))
        self.assertEqual(limit.unit, RateLimitResponseRateLimitUnit.SECOND)
        self.assertEqual(header(blocked, "retry-after"), "1")

    def test_a_replaced_limit_is_not_applied_beside_its_replacement(self):
        first = descriptor(("key_1", "value_1"), ("user", "bkthomps"))
        second = descriptor(("key_2", "value_2"), ("user", "bkthomps"))
        for _ in range(3):
            both = ask(first, second, domain="example7")
            self.assertEqual(both.overall_code, RateLimitResponseCode.OK)
            self.assertIsNone(both.statuses[0].current_limit)
            self.assertEqual(both.statuses[1].current_limit.name, "py.replacing")
        # Alone, py.specific applies: its one permit, untouched by the calls above.
        self.assertEqual(ask(first, domain="example7").overall_code, RateLimitResponseCode.OK)
        self.assertEqual(
            ask(first, domain="example7").overall_code, RateLimitResponseCode.OVER_LIMIT
        )


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped)
    # The line scripts/test.sh counts.
    print(f"envoy: tests: {passed} passed, {failed} failed")
    sys.exit(0 if result.wasSuccessful() else 1)
