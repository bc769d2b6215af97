package dev.ratekeeper.client;

import static dev.ratekeeper.client.testkit.Assert.assertEquals;
import static dev.ratekeeper.client.testkit.Assert.assertFalse;
import static dev.ratekeeper.client.testkit.Assert.assertThrows;
import static dev.ratekeeper.client.testkit.Assert.assertTrue;

import dev.ratekeeper.client.testkit.Test;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.http.HttpConnectTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

public final class ClientTest implements AutoCloseable {

  private static final String GRANT =
    "{\"allowed\":true,\"remaining\":1,\"limit\":2,\"retry_after_ms\":0," +
    "\"reset_after_ms\":5000,\"policy_version\":3}";

  private final List<AutoCloseable> toClose = new ArrayList<>();
  private final FakeClock clock = new FakeClock();

  private <T extends AutoCloseable> T closing(T c) {
    toClose.add(c);
    return c;
  }

  @Override
  public void close() throws IOException {
    for (AutoCloseable c : toClose) {
      try {
        c.close();
      } catch (IOException | RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new IOException(e);
      }
    }
  }

  private FakeServer server() throws IOException {
    return closing(new FakeServer());
  }

  private RatekeeperClient client(String url) {
    return closing(RatekeeperClient.builder().url(url).apiKey("rk_secret_key").build());
  }

  private RatekeeperClient fakeTimeClient(String url) {
    return closing(
      RatekeeperClient.builder()
        .url(url)
        .apiKey("rk_secret_key")
        .sleeper(clock)
        .nanoClock(clock::nanoTime)
        .build()
    );
  }

  /** A port nothing listens on: connecting is refused. */
  private static int closedPort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  /** A server that accepts connections and never answers. */
  private final class SilentServer implements AutoCloseable {

    final ServerSocket socket;
    final List<Socket> accepted = new ArrayList<>();
    final AtomicInteger connections = new AtomicInteger();

    SilentServer() throws IOException {
      socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
      Thread t = new Thread(() -> {
        while (!socket.isClosed()) {
          try {
            Socket s = socket.accept();
            connections.incrementAndGet();
            synchronized (accepted) {
              accepted.add(s);
            }
          } catch (IOException e) {
            return;
          }
        }
      });
      t.setDaemon(true);
      t.start();
      toClose.add(this);
    }

    String url() {
      return "http://127.0.0.1:" + socket.getLocalPort();
    }

    @Override
    public void close() throws IOException {
      socket.close();
      synchronized (accepted) {
        for (Socket s : accepted) {
          s.close();
        }
      }
    }
  }

  // ----- requests and replies

  @Test
  public void acquireSendsTheRequestAndReadsTheGrant() throws Exception {
    FakeServer server = server();
    server.reply(
      200,
      GRANT,
      "RateLimit-Policy",
      "\"orders.create\";q=2",
      "RateLimit",
      "\"orders.create\";r=1;t=5"
    );
    RatekeeperClient rk = client(server.url() + "/");
    Decision d = rk.acquire("orders.create", AcquireOptions.builder().permits(2).key("u1").build());
    assertTrue(d.allowed(), "allowed");
    assertEquals(1L, d.remaining().getAsLong(), "remaining");
    assertEquals(2L, d.limit().getAsLong(), "limit");
    assertEquals(0L, d.retryAfterMs(), "retry");
    assertEquals(5000L, d.resetAfterMs().getAsLong(), "reset");
    assertEquals(3L, d.policyVersion().getAsLong(), "version");
    assertTrue(d.enforced(), "enforced by default");
    assertFalse(d.degraded() || d.cached() || d.shadowDenied(), "plain grant");
    assertEquals(200, d.status(), "status");
    assertEquals("\"orders.create\";q=2", d.headers().get("RateLimit-Policy"), "policy header");
    assertEquals("\"orders.create\";r=1;t=5", d.header("ratelimit").orElse(null), "header");
    FakeServer.Request req = server.requests().get(0);
    assertEquals("POST", req.method, "method");
    assertEquals("/v1/acquire", req.path, "path");
    assertEquals("Bearer rk_secret_key", req.headers.get("authorization"), "api key");
    assertEquals("ratekeeper-java/0.1.0", req.headers.get("user-agent"), "user agent");
    assertTrue(req.headers.get("content-type").startsWith("application/json"), "content type");
    assertEquals(
      Map.of("resource", "orders.create", "permits", 2L, "key", "u1"),
      req.json(),
      "body"
    );
  }

  @Test
  public void aDenialIsADecisionNotAnError() throws Exception {
    FakeServer server = server();
    server.reply(
      429,
      "{\"allowed\":false,\"remaining\":0,\"limit\":2,\"retry_after_ms\":4987," +
      "\"reset_after_ms\":9987,\"policy_version\":1}",
      "Retry-After",
      "5"
    );
    Decision d = client(server.url()).acquire("orders.create");
    assertFalse(d.allowed(), "denied");
    assertEquals(4987L, d.retryAfterMs(), "retry");
    assertEquals("5", d.headers().get("retry-after"), "Retry-After header");
    assertEquals(429, d.status(), "status");
  }

  @Test
  public void optionalFieldsAndFlags() throws Exception {
    FakeServer server = server();
    server.reply(
      200,
      "{\"allowed\":true,\"enforced\":false,\"shadow_denied\":true,\"degraded\":true," +
      "\"lease_id\":\"l-1\",\"future_field\":[1,{\"x\":null}]}"
    );
    Decision d = client(server.url()).acquire("p");
    assertFalse(d.enforced(), "not enforced");
    assertTrue(d.shadowDenied(), "shadow denied");
    assertTrue(d.degraded(), "server-side degraded");
    assertEquals("l-1", d.leaseId().orElse(null), "lease id");
    assertFalse(d.remaining().isPresent(), "remaining absent");
    assertFalse(d.limit().isPresent(), "limit absent");
    assertTrue(d.headers().isEmpty(), "no headers");
  }

  @Test
  public void toStringHidesTheApiKey() {
    RatekeeperClient rk = client("http://127.0.0.1:1");
    assertFalse(rk.toString().contains("rk_secret_key"), "client toString: " + rk);
    RatekeeperClient.Builder b = RatekeeperClient.builder().apiKey("rk_secret_key");
    assertFalse(b.toString().contains("rk_secret_key"), "builder toString");
  }

  @Test
  public void rejectsBadConfiguration() {
    assertThrows(
      IllegalArgumentException.class,
      () -> RatekeeperClient.builder().url("ftp://x"),
      "scheme"
    );
    assertThrows(IllegalStateException.class, () -> RatekeeperClient.builder().build(), "no url");
    assertThrows(
      IllegalArgumentException.class,
      () -> RatekeeperClient.builder().timeout(Duration.ZERO),
      "zero timeout"
    );
    assertThrows(
      IllegalArgumentException.class,
      () -> RatekeeperClient.builder().denialCacheSize(-1),
      "negative cache"
    );
    RatekeeperClient rk = client("http://127.0.0.1:1");
    rk.close();
    assertThrows(IllegalStateException.class, () -> rk.acquire("p"), "closed");
  }

  @Test
  public void oneClientServesManyThreads() throws Exception {
    FakeServer server = server();
    server.reply(200, GRANT);
    RatekeeperClient rk = client(server.url());
    AtomicInteger granted = new AtomicInteger();
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < 8; t++) {
      Thread thread = new Thread(() -> {
        for (int i = 0; i < 20; i++) {
          if (rk.acquire("p").allowed()) {
            granted.incrementAndGet();
          }
        }
      });
      threads.add(thread);
      thread.start();
    }
    for (Thread thread : threads) {
      thread.join(60_000);
    }
    assertEquals(160, granted.get(), "every call answered");
    assertEquals(160, server.count(), "every call sent");
  }

  // ----- errors

  private RatekeeperException errorFor(int status, String problem) throws Exception {
    FakeServer server = server();
    server.problem(status, problem);
    RatekeeperClient rk = client(server.url());
    return assertThrows(RatekeeperException.class, () -> rk.acquire("p"), "status " + status);
  }

  private static String problem(int status, String kind, String extra) {
    return (
      "{\"type\":\"urn:ratekeeper:problem:" +
      kind +
      "\",\"title\":\"T" +
      status +
      "\",\"status\":" +
      status +
      ",\"detail\":\"d" +
      status +
      "\"" +
      extra +
      "}"
    );
  }

  @Test
  public void errorsMapToOneTypePerStatus() throws Exception {
    Object[][] cases = {
      { 400, "malformed", BadRequestException.class },
      { 401, "unauthorized", UnauthorizedException.class },
      { 403, "forbidden", ForbiddenException.class },
      { 404, "lease-not-held", NotFoundException.class },
      { 409, "not-a-lease-policy", ConflictException.class },
      { 422, "validation", InvalidException.class },
      { 503, "unavailable", UnavailableException.class },
    };
    for (Object[] c : cases) {
      int status = (Integer) c[0];
      RatekeeperException e = errorFor(status, problem(status, (String) c[1], ""));
      assertEquals(c[2], e.getClass(), "class for " + status);
      assertEquals(status, e.status(), "status");
      assertEquals("urn:ratekeeper:problem:" + c[1], e.type(), "type");
      assertEquals(c[1], e.kind(), "kind");
      assertEquals("T" + status, e.title(), "title");
      assertEquals("d" + status, e.detail(), "detail");
      assertTrue(e.getMessage().contains("d" + status), "message has the detail");
    }
  }

  @Test
  public void validationErrorsCarryTheFields() throws Exception {
    RatekeeperException e = errorFor(
      422,
      problem(
        422,
        "validation",
        ",\"field\":\"all[1].permits\",\"errors\":[{\"field\":\"all[1].permits\"," +
        "\"message\":\"above max_permits\"},{\"field\":\"key\",\"message\":\"m\"}]"
      )
    );
    assertEquals(InvalidException.class, e.getClass(), "class");
    assertEquals(2, e.errors().size(), "two errors");
    assertEquals("all[1].permits", e.field(), "first field");
    assertEquals("above max_permits", e.errors().get(0).message(), "message");
    RatekeeperException bad = errorFor(400, problem(400, "malformed", ",\"field\":\"resource\""));
    assertEquals("resource", bad.field(), "field alone becomes an error");
  }

  @Test
  public void otherStatusesAreTheBaseType() throws Exception {
    RatekeeperException e = errorFor(500, problem(500, "internal", ""));
    assertEquals(RatekeeperException.class, e.getClass(), "base class for 500");
    assertEquals(500, e.status(), "status");
    FakeServer server = server();
    server.raw(502, "<html>bad gateway</html>", "text/html");
    RatekeeperClient rk = client(server.url());
    RatekeeperException html = assertThrows(
      RatekeeperException.class,
      () -> rk.acquire("p"),
      "html"
    );
    assertEquals(RatekeeperException.class, html.getClass(), "base class for 502");
    assertTrue(html.detail().contains("bad gateway"), "body as detail");
    FakeServer s2 = server();
    s2.raw(200, "not json", "text/plain");
    RatekeeperClient rk2 = client(s2.url());
    RatekeeperException garbage = assertThrows(
      RatekeeperException.class,
      () -> rk2.acquire("p"),
      "garbage 200"
    );
    assertEquals("Unexpected response", garbage.title(), "unexpected");
  }

  // ----- transport: timeouts, refused connections, retries

  @Test
  public void timeoutGivesADegradedDecision() throws Exception {
    SilentServer silent = new SilentServer();
    RatekeeperClient rk = closing(
      RatekeeperClient.builder()
        .url(silent.url())
        .apiKey("k")
        .timeout(Duration.ofMillis(300))
        .build()
    );
    Decision d = rk.acquire("p");
    assertTrue(d.degraded(), "degraded");
    assertFalse(d.allowed(), "fails closed by default");
    assertEquals(0, d.status(), "no status");
    Decision open = rk.acquire(
      "p",
      AcquireOptions.builder().failOpen(true).timeout(Duration.ofMillis(200)).build()
    );
    assertTrue(open.degraded() && open.allowed(), "per-call fail open");
    Decision check = rk.check("p");
    assertTrue(check.degraded() && !check.allowed(), "check degrades as acquire");
    AllDecision all = rk.acquireAll(List.of(Item.of("a"), Item.of("b", "k", 2)));
    assertTrue(all.degraded() && !all.allowed(), "acquireAll degraded");
    assertEquals(2, all.results().size(), "one result per item");
    assertTrue(all.results().get(1).degraded(), "items degraded");
    assertThrows(TransportException.class, () -> rk.refund("p", 1), "refund raises");
    TransportException t = assertThrows(
      TransportException.class,
      () -> rk.release("p", "l1"),
      "release raises"
    );
    assertEquals(0, t.status(), "no status");
  }

  @Test
  public void clientFailOpenDefault() throws Exception {
    SilentServer silent = new SilentServer();
    RatekeeperClient rk = closing(
      RatekeeperClient.builder()
        .url(silent.url())
        .timeout(Duration.ofMillis(200))
        .failOpen(true)
        .build()
    );
    Decision d = rk.acquire("p");
    assertTrue(d.degraded() && d.allowed(), "client default fail open");
    Decision closed = rk.acquire("p", AcquireOptions.builder().failOpen(false).build());
    assertTrue(closed.degraded() && !closed.allowed(), "per-call fail closed");
    Lease lease = rk.lease("p");
    assertFalse(lease.leaseId().isPresent(), "degraded lease has no id");
    lease.close(); // sends nothing
  }

  @Test
  public void refusedConnectionsAreRetriedTwiceWithBackoff() throws Exception {
    RatekeeperClient rk = fakeTimeClient("http://127.0.0.1:" + closedPort());
    Decision d = rk.acquire("p");
    assertTrue(d.degraded() && !d.allowed(), "degraded after retries");
    List<Long> sleeps = clock.sleeps();
    assertEquals(2, sleeps.size(), "two retries: " + sleeps);
    assertTrue(sleeps.get(0) >= 25 && sleeps.get(0) <= 75, "first backoff 50ms +-50%: " + sleeps);
    assertTrue(sleeps.get(1) >= 50 && sleeps.get(1) <= 150, "second 100ms +-50%: " + sleeps);
    assertThrows(TransportException.class, () -> rk.refund("p", 1), "refund raises");
  }

  @Test
  public void retriesNeverPassTheTimeout() throws Exception {
    RatekeeperClient rk = closing(
      RatekeeperClient.builder()
        .url("http://127.0.0.1:" + closedPort())
        .timeout(Duration.ofMillis(20))
        .sleeper(clock)
        .nanoClock(clock::nanoTime)
        .build()
    );
    assertTrue(rk.acquire("p").degraded(), "degraded");
    assertEquals(List.of(), clock.sleeps(), "no backoff fits in 20 ms");
  }

  @Test
  public void aRefusedThenAcceptedConnectionIsGranted() throws Exception {
    FakeServer server = server();
    server.reply(200, GRANT);
    RatekeeperClient rk = fakeTimeClient(server.url());
    assertTrue(rk.acquire("p").allowed(), "granted");
    assertEquals(List.of(), clock.sleeps(), "no retry when connected");
  }

  @Test
  public void timeoutsAndResetsAreNotRetried() throws Exception {
    SilentServer silent = new SilentServer();
    RatekeeperClient rk = closing(
      RatekeeperClient.builder()
        .url(silent.url())
        .timeout(Duration.ofMillis(300))
        .sleeper(clock)
        .build()
    );
    assertTrue(rk.acquire("p").degraded(), "degraded");
    assertEquals(List.of(), clock.sleeps(), "a timeout is not retried");
    assertEquals(1, silent.connections.get(), "one connection");

    // A server that accepts and closes at once: the connection is reset, not refused.
    ServerSocket resetting = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    AtomicInteger accepted = new AtomicInteger();
    Thread t = new Thread(() -> {
      while (!resetting.isClosed()) {
        try (Socket s = resetting.accept()) {
          accepted.incrementAndGet();
          s.setSoLinger(true, 0);
        } catch (IOException e) {
          return;
        }
      }
    });
    t.setDaemon(true);
    t.start();
    try {
      RatekeeperClient rk2 = closing(
        RatekeeperClient.builder()
          .url("http://127.0.0.1:" + resetting.getLocalPort())
          .timeout(Duration.ofSeconds(2))
          .sleeper(clock)
          .build()
      );
      assertTrue(rk2.acquire("p").degraded(), "reset: degraded");
      assertEquals(List.of(), clock.sleeps(), "a reset is not retried");
    } finally {
      resetting.close();
    }
  }

  @Test
  public void onlyConnectFailuresCountAsRefused() {
    assertTrue(RatekeeperClient.refused(new ConnectException()), "refused");
    assertTrue(
      RatekeeperClient.refused(new IOException(new ConnectException("Connection refused"))),
      "wrapped"
    );
    assertFalse(
      RatekeeperClient.refused(new ConnectException("Connection reset by peer")),
      "reset"
    );
    assertFalse(
      RatekeeperClient.refused(
        new ConnectException(null) {
          private static final long serialVersionUID = 1L;

          @Override
          public synchronized Throwable getCause() {
            return new SocketException("Connection reset");
          }
        }
      ),
      "reset underneath"
    );
    assertFalse(RatekeeperClient.refused(new HttpConnectTimeoutException("slow")), "timeout");
    assertFalse(RatekeeperClient.refused(new IOException("broken")), "other I/O");
  }

  @Test
  public void errorRepliesAreNotRetried() throws Exception {
    FakeServer server = server();
    server.problem(503, problem(503, "unavailable", ""));
    RatekeeperClient rk = fakeTimeClient(server.url());
    assertThrows(UnavailableException.class, () -> rk.acquire("p"), "503 raises");
    assertEquals(1, server.count(), "one request");
    assertEquals(List.of(), clock.sleeps(), "no retry");
  }

  // ----- denial cache through the client

  private static String denial(long retryMs) {
    return (
      "{\"allowed\":false,\"remaining\":0,\"limit\":2,\"retry_after_ms\":" +
      retryMs +
      ",\"reset_after_ms\":9000,\"policy_version\":1}"
    );
  }

  @Test
  public void deniedCallsAreAnsweredLocally() throws Exception {
    FakeServer server = server();
    server.reply(429, denial(5000), "RateLimit-Policy", "\"p\";q=2");
    server.reply(200, GRANT);
    RatekeeperClient rk = fakeTimeClient(server.url());
    AcquireOptions two = AcquireOptions.builder().permits(2).build();
    assertFalse(rk.acquire("p", two).cached(), "first denial from the server");
    Decision cached = rk.acquire("p", AcquireOptions.builder().permits(3).build());
    assertTrue(cached.cached() && !cached.allowed(), "answered locally");
    assertEquals(1, server.count(), "no second request");
    assertEquals(2L, cached.limit().getAsLong(), "same limit");
    assertEquals("\"p\";q=2", cached.headers().get("RateLimit-Policy"), "policy header");
    assertFalse(rk.acquire("p").cached(), "fewer permits go to the server (granted)");
    assertEquals(2, server.count(), "sent");
    assertFalse(rk.acquire("p", two).cached(), "the grant dropped the entry");
    assertEquals(3, server.count(), "sent again");
  }

  @Test
  public void cacheEntryExpiresAndRefundForgets() throws Exception {
    FakeServer server = server();
    server.reply(429, denial(1000));
    RatekeeperClient rk = fakeTimeClient(server.url());
    rk.acquire("p", AcquireOptions.builder().key("k").build());
    assertTrue(rk.acquire("p", AcquireOptions.builder().key("k").build()).cached(), "cached");
    assertFalse(rk.acquire("p").cached(), "no key is another entry");
    clock.advanceMs(1000);
    assertFalse(
      rk.acquire("p", AcquireOptions.builder().key("k").build()).cached(),
      "expired, sent"
    );
    server.reply(200, GRANT); // the refund's reply, and every later one
    rk.refund("p", 1, "k");
    assertFalse(rk.denialCache().contains("p", "k"), "refund forgets");
  }

  @Test
  public void cacheCanBeTurnedOff() throws Exception {
    FakeServer server = server();
    server.reply(429, denial(5000));
    RatekeeperClient rk = closing(
      RatekeeperClient.builder().url(server.url()).denialCacheSize(0).build()
    );
    rk.acquire("p");
    assertFalse(rk.acquire("p").cached(), "not cached");
    assertEquals(2, server.count(), "both sent");
  }

  @Test
  public void acquireAllAlwaysSendsAndRecordsItemDenials() throws Exception {
    FakeServer server = server();
    server.reply(
      429,
      "{\"allowed\":false,\"results\":[" + GRANT + "," + denial(3000) + "]}",
      "Retry-After",
      "3"
    );
    RatekeeperClient rk = fakeTimeClient(server.url());
    List<Item> items = List.of(Item.of("a"), Item.of("b", "u42", 2));
    AllDecision all = rk.acquireAll(items);
    assertFalse(all.allowed(), "denied");
    assertEquals(2, all.results().size(), "two results");
    assertTrue(all.results().get(0).allowed(), "first item would be granted");
    assertEquals(3000L, all.retryAfterMs(), "longest wait");
    assertEquals("3", all.headers().get("Retry-After"), "headers");
    Map<String, Object> body = server.requests().get(0).json();
    assertEquals(
      "[{\"resource\":\"a\",\"permits\":1},{\"resource\":\"b\",\"permits\":2,\"key\":\"u42\"}]",
      Json.write(body.get("all")),
      "items sent"
    );
    rk.acquireAll(items);
    assertEquals(2, server.count(), "acquireAll is never answered locally");
    Decision cached = rk.acquire("b", AcquireOptions.builder().permits(2).key("u42").build());
    assertTrue(cached.cached(), "the item's denial was recorded");
  }

  // ----- wait

  @Test
  public void waitSleepsForTheRetryTimeThenAsksAgain() throws Exception {
    FakeServer server = server();
    server.reply(429, denial(30));
    server.reply(200, GRANT);
    RatekeeperClient rk = fakeTimeClient(server.url());
    Decision d = rk.acquire("p", AcquireOptions.builder().waitFor(Duration.ofSeconds(1)).build());
    assertTrue(d.allowed(), "granted after waiting");
    assertEquals(2, server.count(), "asked twice");
    List<Long> sleeps = clock.sleeps();
    assertEquals(1, sleeps.size(), "slept once: " + sleeps);
    assertTrue(sleeps.get(0) > 30 && sleeps.get(0) <= 35, "retry time plus jitter: " + sleeps);
  }

  @Test
  public void waitReturnsAtOnceWhenThePermitCannotComeInTime() throws Exception {
    FakeServer server = server();
    server.reply(429, denial(5000));
    RatekeeperClient rk = fakeTimeClient(server.url());
    Decision d = rk.acquire("p", AcquireOptions.builder().waitFor(Duration.ofSeconds(1)).build());
    assertFalse(d.allowed(), "denied");
    assertEquals(1, server.count(), "asked once");
    assertEquals(List.of(), clock.sleeps(), "no sleep");
    Decision cached = rk.acquire(
      "p",
      AcquireOptions.builder().waitFor(Duration.ofSeconds(1)).build()
    );
    assertTrue(cached.cached(), "cached denial");
    assertEquals(List.of(), clock.sleeps(), "still no sleep");
    assertEquals(1, server.count(), "no request");
  }

  @Test
  public void waitStopsAtItsBound() throws Exception {
    FakeServer server = server();
    server.reply(429, denial(400));
    RatekeeperClient rk = fakeTimeClient(server.url());
    Decision d = rk.acquire("p", AcquireOptions.builder().waitFor(Duration.ofSeconds(1)).build());
    assertFalse(d.allowed(), "denied in the end");
    List<Long> sleeps = clock.sleeps();
    assertEquals(2, sleeps.size(), "two waits fit in 1 s: " + sleeps);
    long total = sleeps.stream().mapToLong(Long::longValue).sum();
    assertTrue(total <= 1000, "never past the bound: " + sleeps);
    for (long s : sleeps) {
      assertTrue(s >= 400, "each sleep at least the retry time: " + sleeps);
    }
    assertEquals(3, server.count(), "asked three times");
  }

  @Test
  public void waitWithRealSleep() throws Exception {
    FakeServer server = server();
    server.reply(429, denial(20));
    server.reply(200, GRANT);
    RatekeeperClient rk = client(server.url());
    Decision d = rk.acquire("p", AcquireOptions.builder().waitFor(Duration.ofSeconds(2)).build());
    assertTrue(d.allowed(), "granted");
    assertEquals(2, server.count(), "asked twice (not answered from the cache after the sleep)");
  }

  // ----- check, refund, release, lease

  @Test
  public void checkSendsZeroPermits() throws Exception {
    FakeServer server = server();
    server.reply(200, GRANT);
    client(server.url()).check("p", "k");
    assertEquals(
      Map.of("resource", "p", "permits", 0L, "key", "k"),
      server.requests().get(0).json(),
      "body"
    );
  }

  @Test
  public void refundAndRelease() throws Exception {
    FakeServer server = server();
    server.reply(200, GRANT);
    server.reply(200, "{\"released\":true,\"permits\":1,\"remaining\":2}");
    RatekeeperClient rk = client(server.url());
    Decision refund = rk.refund("p", 3, "k");
    assertEquals(1L, refund.remaining().getAsLong(), "remaining after refund");
    Released r = rk.release("c", "lease-9");
    assertTrue(r.released(), "released");
    assertEquals(2L, r.remaining(), "remaining");
    assertEquals(1L, r.permits(), "permits");
    List<FakeServer.Request> reqs = server.requests();
    assertEquals("/v1/refund", reqs.get(0).path, "refund path");
    assertEquals(Map.of("resource", "p", "permits", 3L, "key", "k"), reqs.get(0).json(), "refund");
    assertEquals("/v1/release", reqs.get(1).path, "release path");
    assertEquals(Map.of("resource", "c", "lease_id", "lease-9"), reqs.get(1).json(), "release");
  }

  @Test
  public void leaseReleasesAtTheEndOfTheScope() throws Exception {
    FakeServer server = server();
    server.reply(200, "{\"allowed\":true,\"remaining\":0,\"limit\":1,\"lease_id\":\"L1\"}");
    server.reply(200, "{\"released\":true,\"permits\":1,\"remaining\":1}");
    server.reply(429, "{\"allowed\":false,\"remaining\":0,\"limit\":1,\"retry_after_ms\":700}");
    RatekeeperClient rk = client(server.url());
    try (Lease lease = rk.lease("c")) {
      assertEquals("L1", lease.leaseId().orElse(null), "lease id");
      assertEquals(1, server.count(), "not released yet");
    }
    assertEquals(2, server.count(), "released");
    assertEquals(
      Map.of("resource", "c", "lease_id", "L1"),
      server.requests().get(1).json(),
      "release"
    );
    RateLimitedException e = assertThrows(
      RateLimitedException.class,
      () -> rk.lease("c"),
      "denied lease"
    );
    assertEquals(700L, e.decision().retryAfterMs(), "carries the decision");
    assertEquals(429, e.status(), "status");
    assertTrue(e instanceof RatekeeperException, "a RatekeeperException");
  }

  @Test
  public void leaseCloseIsIdempotent() throws Exception {
    FakeServer server = server();
    server.reply(200, "{\"allowed\":true,\"remaining\":0,\"limit\":1,\"lease_id\":\"L1\"}");
    server.reply(200, "{\"released\":true,\"permits\":1,\"remaining\":1}");
    RatekeeperClient rk = client(server.url());
    Lease lease = rk.lease("c");
    lease.close();
    lease.close();
    assertTrue(lease.closed(), "closed");
    assertEquals(2, server.count(), "released once");
  }
}
