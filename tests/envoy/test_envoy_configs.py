"""Envoy configuration that ratekeeper documents, read with Envoy's own message
definitions (PyPI's envoy-data-plane): the README's "Behind Envoy" configuration must be a
valid Envoy bootstrap (an unknown or misspelt field is refused), wire the rate limit
filter to ratekeeper with the API key in the metadata, and name policies by generic_key.

Run by scripts/envoy_client.sh; needs no server.
"""

import pathlib
import re
import sys
import unittest

import yaml

# The typed configs the bootstrap names by "@type", registered by importing them.
import envoy_data_plane.envoy.extensions.filters.http.ratelimit.v3  # noqa: F401
import envoy_data_plane.envoy.extensions.filters.http.router.v3  # noqa: F401
import envoy_data_plane.envoy.extensions.filters.network.http_connection_manager.v3  # noqa: F401
import envoy_data_plane.envoy.extensions.upstreams.http.v3  # noqa: F401
from envoy_data_plane.envoy.config.bootstrap.v3 import Bootstrap

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def readme_envoy_config():
    """The YAML block of the README's "Behind Envoy" section that configures Envoy."""
    text = README.read_text()
    section = text.split("\n## Behind Envoy\n", 1)[1].split("\n## ", 1)[0]
    for block in re.findall(r"```yaml\n(.*?)```", section, re.S):
        if "static_resources" in block:
            return yaml.safe_load(block)
    raise AssertionError("no Envoy configuration in the README's Behind Envoy section")


class ReadmeEnvoyConfig(unittest.TestCase):
    def setUp(self):
        self.raw = readme_envoy_config()
        self.bootstrap = Bootstrap.from_dict(self.raw)

    def connection_manager(self):
        listener = self.bootstrap.static_resources.listeners[0]
        return listener.filter_chains[0].filters[0].typed_config.unpack()

    def test_the_rate_limit_filter_asks_ratekeeper_with_an_api_key(self):
        hcm = self.connection_manager()
        names = [f.name for f in hcm.http_filters]
        self.assertEqual(names, ["envoy.filters.http.ratelimit", "envoy.filters.http.router"])
        ratelimit = hcm.http_filters[0].typed_config.unpack()
        service = ratelimit.rate_limit_service
        self.assertEqual(service.grpc_service.envoy_grpc.cluster_name, "ratekeeper")
        self.assertEqual(service.transport_api_version.name, "V3")
        (metadata,) = service.grpc_service.initial_metadata
        self.assertEqual(metadata.key, "authorization")
        self.assertTrue(metadata.value.startswith("Bearer "))

    def test_the_routes_name_policies_by_generic_key(self):
        route = self.connection_manager().route_config.virtual_hosts[0].routes[0].route
        first_actions = [limit.actions[0] for limit in route.rate_limits]
        self.assertEqual(
            [a.generic_key.descriptor_value for a in first_actions],
            ["orders.create", "orders.all"],
        )
        self.assertEqual(route.rate_limits[0].actions[1].request_headers.descriptor_key, "user")

    def test_ratekeeper_is_reached_over_http2(self):
        cluster = next(c for c in self.bootstrap.static_resources.clusters if c.name == "ratekeeper")
        options = cluster.typed_extension_protocol_options[
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
        ].unpack()
        self.assertIsNotNone(options.explicit_http_config.http2_protocol_options)

    def test_a_misspelt_field_would_be_refused(self):
        # The check above is worth something only if Envoy's definitions refuse what
        # Envoy would refuse.
        hcm = self.raw["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
        service = hcm["typed_config"]["http_filters"][0]["typed_config"]["rate_limit_service"]
        service["grpc_servce"] = service.pop("grpc_service")
        with self.assertRaises(Exception):
            Bootstrap.from_dict(self.raw)


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped)
    # The line scripts/test.sh counts.
    print(f"envoy: tests: {passed} passed, {failed} failed")
    sys.exit(0 if result.wasSuccessful() else 1)
