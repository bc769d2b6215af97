package dev.ratekeeper.client;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

/**
 * A client of a ratekeeper server's acquire API. Thread-safe: make one per server and API key,
 * share it, and close it when done.
 *
 * <pre>{@code
 * try (RatekeeperClient rk = RatekeeperClient.builder()
 *     .url("http://127.0.0.1:8080")
 *     .apiKey(System.getenv("RATEKEEPER_API_KEY"))
 *     .build()) {
 *   Decision d = rk.acquire("orders.create");
 *   if (!d.allowed()) {
 *     // come back in d.retryAfterMs()
 *   }
 * }
 * }</pre>
 *
 * <p>Acquires never fail for want of a reply: a timeout, a refused connection (after at most two
 * retries) or a broken one gives a <em>degraded</em> {@link Decision} whose {@code allowed} is
 * the fail-open setting. Error replies of the server raise a {@link RatekeeperException}
 * subclass.
 */
public final class RatekeeperClient implements AutoCloseable {

  /** This library's version. */
  public static final String VERSION = "0.1.0";

  /** The User-Agent this library sends. */
  public static final String USER_AGENT = "ratekeeper-java/" + VERSION;

  /** The default timeout of a call (2 seconds). */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(2);

  /** The default size of the denial cache. */
  public static final int DEFAULT_DENIAL_CACHE_SIZE = 10_000;

  /** Retries of a call whose connection was refused. */
  static final int MAX_RETRIES = 2;

  /** The first retry's backoff, in milliseconds (doubled for each retry, then jittered). */
  static final long BACKOFF_BASE_MS = 50;

  /** Sleeps; a seam for tests. */
  interface Sleeper {
    void sleep(long millis) throws InterruptedException;
  }

  private final String baseUrl;
  private final String apiKey;
  private final Duration timeout;
  private final boolean failOpen;
  private final int denialCacheSize;
  private final DenialCache cache;
  private final HttpClient http;
  private final ExecutorService executor;
  private final Sleeper sleeper;
  private final LongSupplier nanoClock;
  private final AtomicBoolean closed = new AtomicBoolean();

  private RatekeeperClient(Builder b) {
    this.baseUrl = b.url;
    this.apiKey = b.apiKey;
    this.timeout = b.timeout;
    this.failOpen = b.failOpen;
    this.denialCacheSize = b.denialCacheSize;
    this.sleeper = b.sleeper;
    this.nanoClock = b.nanoClock;
    this.cache = new DenialCache(b.denialCacheSize, b.nanoClock);
    if (b.httpClient != null) {
      this.http = b.httpClient;
      this.executor = null;
    } else {
      AtomicInteger count = new AtomicInteger();
      this.executor = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "ratekeeper-http-" + count.incrementAndGet());
        t.setDaemon(true);
        return t;
      });
      this.http = HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(b.timeout)
        .executor(executor)
        .build();
    }
  }

  /** A builder; {@link Builder#url} is required. */
  public static Builder builder() {
    return new Builder();
  }

  // ---------------------------------------------------------------------------------------
  // acquire

  /** Acquires one permit of a resource. */
  public Decision acquire(String resource) {
    return acquire(resource, AcquireOptions.DEFAULT);
  }

  /**
   * Acquires permits of a resource. A denial is a {@link Decision} with {@code allowed() ==
   * false}; with {@link AcquireOptions.Builder#waitFor} set, a denial whose permits can come
   * within that bound is waited for (sleeping, never spinning).
   *
   * @throws RatekeeperException (a subclass) when the server answers with an error
   */
  public Decision acquire(String resource, AcquireOptions options) {
    Objects.requireNonNull(resource, "resource");
    AcquireOptions o = options == null ? AcquireOptions.DEFAULT : options;
    long waitNanos = o.waitFor() == null ? 0 : o.waitFor().toNanos();
    if (waitNanos <= 0) {
      return acquireOnce(resource, o);
    }
    long deadline = nanoClock.getAsLong() + waitNanos;
    while (true) {
      Decision d = acquireOnce(resource, o);
      if (!shouldWait(d.allowed(), d.degraded(), d.retryAfterMs(), deadline)) {
        return d;
      }
      if (!sleepFor(d.retryAfterMs(), deadline)) {
        return d;
      }
    }
  }

  /** Whether a denial is worth waiting for: its permits come before the deadline. */
  private boolean shouldWait(boolean allowed, boolean degraded, long retryAfterMs, long deadline) {
    if (allowed || degraded || retryAfterMs <= 0) {
      return false;
    }
    long leftNanos = deadline - nanoClock.getAsLong();
    return retryAfterMs * 1_000_000 <= leftNanos;
  }

  /**
   * Sleeps the retry time plus a little jitter (at least 1 ms, never past the deadline by more
   * than it allows); false when interrupted (the flag is set again).
   */
  private boolean sleepFor(long retryAfterMs, long deadline) {
    long jitter =
      1 + ThreadLocalRandom.current().nextLong(Math.max(1, Math.min(50, retryAfterMs / 10)));
    long leftMs = Math.max(1, (deadline - nanoClock.getAsLong()) / 1_000_000);
    long sleep = Math.max(1, Math.min(retryAfterMs + jitter, Math.max(retryAfterMs, leftMs)));
    try {
      sleeper.sleep(sleep);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  private Decision acquireOnce(String resource, AcquireOptions o) {
    requireOpen();
    Decision cached = cache.lookup(resource, o.key(), o.permits());
    if (cached != null) {
      return cached;
    }
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("resource", resource);
    body.put("permits", o.permits());
    if (o.key() != null) {
      body.put("key", o.key());
    }
    Reply reply;
    try {
      reply = post("/v1/acquire", body, timeoutOf(o));
    } catch (TransportException e) {
      return Decision.degraded(failOpenOf(o));
    }
    if (reply.status != 200 && reply.status != 429) {
      throw reply.error();
    }
    Decision d = Decision.fromJson(reply.status, reply.object(), reply.headers);
    remember(resource, o.key(), o.permits(), d);
    return d;
  }

  private void remember(String resource, String key, long permits, Decision d) {
    if (d.allowed()) {
      cache.forget(resource, key);
    } else {
      cache.record(resource, key, permits, d);
    }
  }

  // ---------------------------------------------------------------------------------------
  // acquireAll

  /** Acquires every item, or none: see {@link #acquireAll(List, AcquireOptions)}. */
  public AllDecision acquireAll(List<Item> items) {
    return acquireAll(items, AcquireOptions.DEFAULT);
  }

  /**
   * Acquires every item together, all or nothing (1 to 16 items). Always sends its request (the
   * denial cache does not answer it) and remembers the denials of its items. Of the options, the
   * fail-open setting, the timeout and the wait bound apply (permits and key are the items').
   *
   * @throws RatekeeperException (a subclass) when the server answers with an error
   */
  public AllDecision acquireAll(List<Item> items, AcquireOptions options) {
    Objects.requireNonNull(items, "items");
    AcquireOptions o = options == null ? AcquireOptions.DEFAULT : options;
    long waitNanos = o.waitFor() == null ? 0 : o.waitFor().toNanos();
    long deadline = nanoClock.getAsLong() + waitNanos;
    while (true) {
      AllDecision d = acquireAllOnce(items, o);
      if (waitNanos <= 0 || !shouldWait(d.allowed(), d.degraded(), d.retryAfterMs(), deadline)) {
        return d;
      }
      if (!sleepFor(d.retryAfterMs(), deadline)) {
        return d;
      }
    }
  }

  private AllDecision acquireAllOnce(List<Item> items, AcquireOptions o) {
    requireOpen();
    List<Object> all = new ArrayList<>();
    for (Item item : items) {
      Map<String, Object> entry = new LinkedHashMap<>();
      entry.put("resource", item.resource());
      entry.put("permits", item.permits());
      if (item.key() != null) {
        entry.put("key", item.key());
      }
      all.add(entry);
    }
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("all", all);
    Reply reply;
    try {
      reply = post("/v1/acquire", body, timeoutOf(o));
    } catch (TransportException e) {
      boolean allowed = failOpenOf(o);
      List<Decision> results = new ArrayList<>();
      for (int i = 0; i < items.size(); i++) {
        results.add(Decision.degraded(allowed));
      }
      return new AllDecision(allowed, results, true, null);
    }
    if (reply.status != 200 && reply.status != 429) {
      throw reply.error();
    }
    Map<String, Object> object = reply.object();
    Boolean allowed = Json.boolField(object, "allowed");
    if (allowed == null) {
      throw reply.unexpected("no \"allowed\" in the reply");
    }
    List<Decision> results = new ArrayList<>();
    List<Map<String, Object>> raw = Json.objectsField(object, "results");
    for (int i = 0; i < raw.size(); i++) {
      Decision d = Decision.fromJson(reply.status, raw.get(i), null);
      results.add(d);
      if (i < items.size()) {
        Item item = items.get(i);
        remember(item.resource(), item.key(), item.permits(), d);
      }
    }
    boolean degraded = !results.isEmpty() && results.stream().allMatch(Decision::degraded);
    return new AllDecision(allowed, results, degraded, reply.headers);
  }

  // ---------------------------------------------------------------------------------------
  // check, refund, release, lease

  /** Whether one permit would be granted now, taking nothing (an acquire of 0 permits). */
  public Decision check(String resource) {
    return check(resource, AcquireOptions.DEFAULT);
  }

  /** {@link #check(String)} for a key of a {@code per_key} policy. */
  public Decision check(String resource, String key) {
    return check(resource, AcquireOptions.builder().key(key).build());
  }

  /** {@link #check(String)} with options (key, fail-open, timeout; permits is ignored). */
  public Decision check(String resource, AcquireOptions options) {
    AcquireOptions o = options == null ? AcquireOptions.DEFAULT : options;
    return acquire(resource, o.toBuilder().permits(0).build());
  }

  /** Gives back permits a grant took but the work did not use. */
  public Decision refund(String resource, long permits) {
    return refund(resource, AcquireOptions.builder().permits(permits).build());
  }

  /** {@link #refund(String, long)} for a key of a {@code per_key} policy. */
  public Decision refund(String resource, long permits, String key) {
    return refund(resource, AcquireOptions.builder().permits(permits).key(key).build());
  }

  /**
   * Gives back {@code options.permits()} permits of (resource, key); the reply is an acquire's,
   * with the remaining permits after the refund. Forgets the cached denial of (resource, key).
   *
   * @throws TransportException when no reply came
   * @throws RatekeeperException (a subclass) when the server answers with an error
   */
  public Decision refund(String resource, AcquireOptions options) {
    Objects.requireNonNull(resource, "resource");
    AcquireOptions o = options == null ? AcquireOptions.DEFAULT : options;
    requireOpen();
    cache.forget(resource, o.key());
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("resource", resource);
    body.put("permits", o.permits());
    if (o.key() != null) {
      body.put("key", o.key());
    }
    Reply reply = post("/v1/refund", body, timeoutOf(o));
    if (reply.status != 200 && reply.status != 429) {
      throw reply.error();
    }
    return Decision.fromJson(reply.status, reply.object(), reply.headers);
  }

  /** Gives back the permits of a lease of a concurrency policy. */
  public Released release(String resource, String leaseId) {
    return release(resource, leaseId, AcquireOptions.DEFAULT);
  }

  /**
   * Gives back the permits of a lease (of (resource, key), with the options' key and timeout).
   * Forgets the cached denial of (resource, key).
   *
   * @throws NotFoundException when this application holds no such lease ({@code lease-not-held})
   * @throws ConflictException when the policy hands out no leases
   * @throws TransportException when no reply came
   */
  public Released release(String resource, String leaseId, AcquireOptions options) {
    Objects.requireNonNull(resource, "resource");
    Objects.requireNonNull(leaseId, "leaseId");
    AcquireOptions o = options == null ? AcquireOptions.DEFAULT : options;
    requireOpen();
    cache.forget(resource, o.key());
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("resource", resource);
    body.put("lease_id", leaseId);
    if (o.key() != null) {
      body.put("key", o.key());
    }
    Reply reply = post("/v1/release", body, timeoutOf(o));
    if (reply.status != 200) {
      throw reply.error();
    }
    Map<String, Object> object = reply.object();
    Boolean released = Json.boolField(object, "released");
    Long permits = Json.longField(object, "permits");
    Long remaining = Json.longField(object, "remaining");
    if (released == null || permits == null || remaining == null) {
      throw reply.unexpected("not a release reply");
    }
    return new Released(released, permits, remaining);
  }

  /** Takes a permit of a concurrency policy for the scope of a try-with-resources block. */
  public Lease lease(String resource) {
    return lease(resource, AcquireOptions.DEFAULT);
  }

  /**
   * Takes permits of a concurrency policy for the scope of a try-with-resources block; closing
   * the lease releases them.
   *
   * <pre>{@code
   * try (Lease lease = rk.lease("reports.export")) {
   *   export();
   * } catch (RateLimitedException e) {
   *   // not granted: e.decision().retryAfterMs()
   * }
   * }</pre>
   *
   * @throws RateLimitedException when not granted (denied, or degraded and failing closed)
   */
  public Lease lease(String resource, AcquireOptions options) {
    AcquireOptions o = options == null ? AcquireOptions.DEFAULT : options;
    Decision d = acquire(resource, o);
    if (!d.allowed()) {
      throw new RateLimitedException(resource, d);
    }
    return new Lease(this, resource, o, d);
  }

  // ---------------------------------------------------------------------------------------
  // transport

  private Duration timeoutOf(AcquireOptions o) {
    return o.timeout() != null ? o.timeout() : timeout;
  }

  private boolean failOpenOf(AcquireOptions o) {
    return o.failOpen() != null ? o.failOpen() : failOpen;
  }

  private void requireOpen() {
    if (closed.get()) {
      throw new IllegalStateException("the client is closed");
    }
  }

  /** A reply: status, the rate-limit headers, and the body. */
  private static final class Reply {

    final int status;
    final Map<String, String> headers;
    final String body;

    Reply(int status, Map<String, String> headers, String body) {
      this.status = status;
      this.headers = headers;
      this.body = body;
    }

    Map<String, Object> object() {
      try {
        return Json.parseObject(body);
      } catch (Json.ParseException e) {
        throw unexpected("the reply is not a JSON object (" + e.getMessage() + ")");
      }
    }

    RatekeeperException unexpected(String detail) {
      return new RatekeeperException(status, null, "Unexpected response", detail, null, null);
    }

    RatekeeperException error() {
      Map<String, Object> problem;
      try {
        problem = Json.parseObject(body);
      } catch (Json.ParseException e) {
        problem = new LinkedHashMap<>();
      }
      return Errors.fromProblem(status, problem, body);
    }
  }

  /**
   * POSTs a JSON body; retries a refused connection at most {@link #MAX_RETRIES} times with
   * jittered exponential backoff, never past the timeout.
   *
   * @throws TransportException when no reply came in time
   */
  private Reply post(String path, Map<String, Object> body, Duration callTimeout) {
    URI uri = URI.create(baseUrl + path);
    String json = Json.write(body);
    long deadline = nanoClock.getAsLong() + callTimeout.toNanos();
    int attempt = 0;
    while (true) {
      long left = deadline - nanoClock.getAsLong();
      if (left <= 0) {
        throw new TransportException("no reply within " + callTimeout.toMillis() + " ms", null);
      }
      HttpRequest.Builder request = HttpRequest.newBuilder(uri)
        .timeout(Duration.ofNanos(left))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .header("User-Agent", USER_AGENT)
        .POST(HttpRequest.BodyPublishers.ofString(json, StandardCharsets.UTF_8));
      if (apiKey != null) {
        request.header("Authorization", "Bearer " + apiKey);
      }
      CompletableFuture<HttpResponse<String>> future = http.sendAsync(
        request.build(),
        HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8)
      );
      try {
        HttpResponse<String> response = future.get(left, TimeUnit.NANOSECONDS);
        return new Reply(response.statusCode(), rateLimitHeaders(response), response.body());
      } catch (TimeoutException e) {
        future.cancel(true);
        throw new TransportException("no reply within " + callTimeout.toMillis() + " ms", e);
      } catch (InterruptedException e) {
        future.cancel(true);
        Thread.currentThread().interrupt();
        throw new TransportException("interrupted", e);
      } catch (ExecutionException e) {
        Throwable cause = e.getCause() == null ? e : e.getCause();
        if (!refused(cause) || attempt >= MAX_RETRIES) {
          throw new TransportException(describe(cause), cause);
        }
        double jitter = 0.5 + ThreadLocalRandom.current().nextDouble();
        long backoffMs = Math.max(1, (long) (BACKOFF_BASE_MS * (1L << attempt) * jitter));
        if (nanoClock.getAsLong() + backoffMs * 1_000_000 >= deadline) {
          throw new TransportException(describe(cause), cause);
        }
        try {
          sleeper.sleep(backoffMs);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw new TransportException("interrupted", ie);
        }
        attempt++;
      }
    }
  }

  /**
   * Whether the request surely did not reach the server: the connection could not be made (a
   * {@link ConnectException}). Not a timeout, and not a connection that was made and then reset
   * (which the JDK may also report as a {@code ConnectException}).
   */
  static boolean refused(Throwable t) {
    boolean connect = false;
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof HttpTimeoutException) {
        return false;
      }
      String message = c.getMessage();
      if (message != null && message.toLowerCase(Locale.ROOT).contains("reset")) {
        return false;
      }
      if (c instanceof ConnectException) {
        connect = true;
      }
    }
    return connect;
  }

  private static String describe(Throwable t) {
    String what = t instanceof IOException ? "connection failed" : "request failed";
    return (
      what +
      ": " +
      t.getClass().getSimpleName() +
      (t.getMessage() == null ? "" : " " + t.getMessage())
    );
  }

  private static Map<String, String> rateLimitHeaders(HttpResponse<?> response) {
    Map<String, String> out = new LinkedHashMap<>();
    for (String name : Decision.HEADER_NAMES) {
      response
        .headers()
        .firstValue(name)
        .ifPresent(v -> out.put(name, v));
    }
    return out;
  }

  /** Closes the client: later calls throw {@link IllegalStateException}. */
  @Override
  public void close() {
    if (closed.compareAndSet(false, true) && executor != null) {
      executor.shutdownNow();
    }
  }

  /** The denial cache (for tests). */
  DenialCache denialCache() {
    return cache;
  }

  @Override
  public String toString() {
    return (
      "RatekeeperClient{url=" +
      baseUrl +
      ", apiKey=" +
      (apiKey == null ? "none" : "***") +
      ", timeout=" +
      timeout +
      ", failOpen=" +
      failOpen +
      ", denialCacheSize=" +
      denialCacheSize +
      "}"
    );
  }

  /** Builds a {@link RatekeeperClient}. */
  public static final class Builder {

    private String url;
    private String apiKey;
    private Duration timeout = DEFAULT_TIMEOUT;
    private boolean failOpen;
    private int denialCacheSize = DEFAULT_DENIAL_CACHE_SIZE;
    private HttpClient httpClient;
    private Sleeper sleeper = Thread::sleep;
    private LongSupplier nanoClock = System::nanoTime;

    private Builder() {}

    /** The server's base URL, e.g. {@code http://127.0.0.1:8080} (required). */
    public Builder url(String url) {
      Objects.requireNonNull(url, "url");
      URI uri = URI.create(url);
      if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme())) {
        throw new IllegalArgumentException("url must be http or https: " + url);
      }
      if (uri.getHost() == null) {
        throw new IllegalArgumentException("url has no host: " + url);
      }
      String s = url;
      while (s.endsWith("/")) {
        s = s.substring(0, s.length() - 1);
      }
      this.url = s;
      return this;
    }

    /** The application's API key, sent as {@code Authorization: Bearer <key>}. */
    public Builder apiKey(String apiKey) {
      this.apiKey = apiKey;
      return this;
    }

    /**
     * The default timeout of a call, retries included (default 2 s). It also bounds the making
     * of each connection, whatever a call's own timeout.
     */
    public Builder timeout(Duration timeout) {
      Objects.requireNonNull(timeout, "timeout");
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("timeout must be positive");
      }
      this.timeout = timeout;
      return this;
    }

    /**
     * Whether an acquire that gets no reply is granted (a degraded decision); default false
     * (fail closed). Each call may override it.
     */
    public Builder failOpen(boolean failOpen) {
      this.failOpen = failOpen;
      return this;
    }

    /** Entries of the denial cache (default 10,000); 0 turns it off. */
    public Builder denialCacheSize(int size) {
      if (size < 0) {
        throw new IllegalArgumentException("denialCacheSize must be >= 0");
      }
      this.denialCacheSize = size;
      return this;
    }

    /**
     * An {@link HttpClient} of your own (proxy, TLS settings); the client does not close it.
     * By default the client makes one.
     */
    public Builder httpClient(HttpClient httpClient) {
      this.httpClient = httpClient;
      return this;
    }

    Builder sleeper(Sleeper sleeper) {
      this.sleeper = Objects.requireNonNull(sleeper);
      return this;
    }

    Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock);
      return this;
    }

    /** The client. */
    public RatekeeperClient build() {
      if (url == null) {
        throw new IllegalStateException("url is required");
      }
      return new RatekeeperClient(this);
    }

    @Override
    public String toString() {
      return (
        "RatekeeperClient.Builder{url=" +
        url +
        ", apiKey=" +
        (apiKey == null ? "none" : "***") +
        "}"
      );
    }
  }
}
