package dev.ratekeeper.client;

import static dev.ratekeeper.client.testkit.Assert.assertEquals;
import static dev.ratekeeper.client.testkit.Assert.assertFalse;
import static dev.ratekeeper.client.testkit.Assert.assertNull;
import static dev.ratekeeper.client.testkit.Assert.assertThrows;
import static dev.ratekeeper.client.testkit.Assert.assertTrue;

import dev.ratekeeper.client.testkit.Test;
import java.time.Duration;
import java.util.Map;

public final class RateLimitGateTest {

  private static Decision decision(
    boolean allowed,
    Long retryMs,
    boolean degraded,
    boolean cached,
    Map<String, String> h
  ) {
    return new Decision(
      allowed ? 200 : 429,
      allowed,
      0L,
      2L,
      retryMs,
      1000L,
      1L,
      null,
      degraded,
      false,
      cached,
      null,
      h
    );
  }

  @Test
  public void grantedGoesOnWithTheRateLimitHeaders() {
    RateLimitGate.Verdict v = RateLimitGate.verdict(
      decision(
        true,
        0L,
        false,
        false,
        Map.of("RateLimit", "\"p\";r=1;t=5", "RateLimit-Policy", "\"p\";q=2")
      )
    );
    assertTrue(v.proceed(), "proceeds");
    assertEquals(
      Map.of("RateLimit", "\"p\";r=1;t=5", "RateLimit-Policy", "\"p\";q=2"),
      v.headers(),
      "headers passed on"
    );
    assertNull(v.body(), "no body");
  }

  @Test
  public void deniedIs429WithRetryAfter() {
    RateLimitGate.Verdict v = RateLimitGate.verdict(
      decision(
        false,
        4987L,
        false,
        false,
        Map.of("RateLimit", "\"p\";r=0;t=5", "RateLimit-Policy", "\"p\";q=2", "Retry-After", "5")
      )
    );
    assertFalse(v.proceed(), "stops");
    assertEquals(429, v.status(), "429");
    assertEquals("5", v.headers().get("Retry-After"), "Retry-After");
    assertEquals("\"p\";r=0;t=5", v.headers().get("RateLimit"), "RateLimit");
    Map<String, Object> body = Json.parseObject(v.body());
    assertEquals(429L, body.get("status"), "problem body");
  }

  @Test
  public void cachedDenialGetsARetryAfterInWholeSeconds() {
    RateLimitGate.Verdict v = RateLimitGate.verdict(decision(false, 1200L, false, true, Map.of()));
    assertEquals(429, v.status(), "429");
    assertEquals("2", v.headers().get("Retry-After"), "rounded up");
    RateLimitGate.Verdict small = RateLimitGate.verdict(decision(false, 0L, false, true, Map.of()));
    assertEquals("1", small.headers().get("Retry-After"), "at least 1");
  }

  @Test
  public void degradedDenialIs503AndDegradedGrantGoesOn() {
    RateLimitGate.Verdict closed = RateLimitGate.verdict(Decision.degraded(false));
    assertEquals(503, closed.status(), "503 failing closed");
    assertEquals("1", closed.headers().get("Retry-After"), "Retry-After");
    RateLimitGate.Verdict open = RateLimitGate.verdict(Decision.degraded(true));
    assertTrue(open.proceed(), "fail open proceeds");
    assertTrue(open.headers().isEmpty(), "no headers");
  }

  @Test
  public void decideAcquiresForTheRequestKey() throws Exception {
    try (
      FakeServer server = new FakeServer();
      RatekeeperClient rk = RatekeeperClient.builder().url(server.url()).build()
    ) {
      server.reply(
        429,
        "{\"allowed\":false,\"remaining\":0,\"limit\":2,\"retry_after_ms\":2500}",
        "Retry-After",
        "3"
      );
      RateLimitGate gate = new RateLimitGate(
        rk,
        AcquireOptions.builder().permits(2).key("ignored").build()
      );
      RateLimitGate.Verdict v = gate.decide("api", "user-1");
      assertEquals(429, v.status(), "denied");
      assertEquals(
        Map.of("resource", "api", "permits", 2L, "key", "user-1"),
        server.requests().get(0).json(),
        "request key used"
      );
      RateLimitGate.Verdict again = gate.decide("api", "user-1");
      assertTrue(again.decision().cached(), "second denial from the cache");
      assertEquals(1, server.count(), "one request");
    }
  }

  @Test
  public void serverErrorsAreRaised() throws Exception {
    try (
      FakeServer server = new FakeServer();
      RatekeeperClient rk = RatekeeperClient.builder()
        .url(server.url())
        .timeout(Duration.ofSeconds(2))
        .build()
    ) {
      server.problem(
        404,
        "{\"type\":\"urn:ratekeeper:problem:not-found\",\"title\":\"Not found\"," +
        "\"status\":404,\"detail\":\"no policy named \\\"x\\\"\"}"
      );
      RateLimitGate gate = new RateLimitGate(rk);
      NotFoundException e = assertThrows(
        NotFoundException.class,
        () -> gate.decide("x", null),
        "404 raised"
      );
      assertEquals("no policy named \"x\"", e.detail(), "escaped detail read");
    }
  }
}
