package dev.ratekeeper.client;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * What a web middleware does with each request, without any web framework: acquire a permit of
 * a resource for a key, and say whether the request goes on, or the status, headers and body to
 * answer it with. The servlet filter ({@code dev.ratekeeper.client.servlet.RateLimitFilter})
 * delegates to it; so can an adapter for any other framework.
 *
 * <ul>
 *   <li>granted: the request goes on, with the {@code RateLimit} and {@code RateLimit-Policy}
 *       headers to pass on;
 *   <li>denied: 429 with {@code Retry-After} (whole seconds, at least 1) and the rate-limit
 *       headers, and a problem+json body;
 *   <li>no reply from ratekeeper and failing closed (a degraded denial): 503 with {@code
 *       Retry-After: 1}; failing open, the request goes on without headers.
 * </ul>
 *
 * Errors of the server (an unknown resource, a bad API key) are not hidden: they are raised as
 * {@link RatekeeperException}s, which a web framework turns into a 500.
 */
public final class RateLimitGate {

  private final RatekeeperClient client;
  private final AcquireOptions options;

  /** A gate acquiring one permit per request with the client's defaults. */
  public RateLimitGate(RatekeeperClient client) {
    this(client, AcquireOptions.DEFAULT);
  }

  /**
   * A gate acquiring with these options per request (permits, fail-open, timeout, wait bound);
   * their key is replaced by each request's key.
   */
  public RateLimitGate(RatekeeperClient client, AcquireOptions options) {
    this.client = Objects.requireNonNull(client, "client");
    this.options = options == null ? AcquireOptions.DEFAULT : options;
  }

  /** What to do with one request: acquire a permit of {@code resource} for {@code key}. */
  public Verdict decide(String resource, String key) {
    Decision d = client.acquire(resource, options.toBuilder().key(key).build());
    return verdict(d);
  }

  /** The verdict for a decision. */
  public static Verdict verdict(Decision d) {
    Map<String, String> headers = new LinkedHashMap<>();
    d.header("RateLimit-Policy").ifPresent(v -> headers.put("RateLimit-Policy", v));
    d.header("RateLimit").ifPresent(v -> headers.put("RateLimit", v));
    if (d.allowed()) {
      return new Verdict(true, 200, headers, null, d);
    }
    if (d.degraded()) {
      headers.put("Retry-After", "1");
      return new Verdict(false, 503, headers, problem(503, "Service Unavailable", 1), d);
    }
    long seconds = Math.max(1, (d.retryAfterMs() + 999) / 1000);
    String retryAfter = d.header("Retry-After").orElse(Long.toString(seconds));
    headers.put("Retry-After", retryAfter);
    return new Verdict(false, 429, headers, problem(429, "Too Many Requests", seconds), d);
  }

  private static String problem(int status, String title, long seconds) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("type", "about:blank");
    body.put("title", title);
    body.put("status", status);
    body.put("detail", "retry after " + seconds + " s");
    return Json.write(body);
  }

  /** What to do with a request: let it go on, or answer it. */
  public static final class Verdict {

    /** The content type of {@link #body()}. */
    public static final String PROBLEM_JSON = "application/problem+json";

    private final boolean proceed;
    private final int status;
    private final Map<String, String> headers;
    private final String body;
    private final Decision decision;

    Verdict(boolean proceed, int status, Map<String, String> headers, String body, Decision d) {
      this.proceed = proceed;
      this.status = status;
      this.headers = Collections.unmodifiableMap(headers);
      this.body = body;
      this.decision = d;
    }

    /** True: pass the request on (setting {@link #headers()} on its response). */
    public boolean proceed() {
      return proceed;
    }

    /** The status to answer with when not proceeding (429 or 503); 200 when proceeding. */
    public int status() {
      return status;
    }

    /** The headers to set on the response, in either case. */
    public Map<String, String> headers() {
      return headers;
    }

    /** The body ({@value #PROBLEM_JSON}) to answer with when not proceeding, else null. */
    public String body() {
      return body;
    }

    /** The decision behind the verdict. */
    public Decision decision() {
      return decision;
    }

    @Override
    public String toString() {
      return "Verdict{proceed=" + proceed + ", status=" + status + ", headers=" + headers + "}";
    }
  }
}
