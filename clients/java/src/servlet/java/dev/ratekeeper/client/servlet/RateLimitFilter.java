package dev.ratekeeper.client.servlet;

import dev.ratekeeper.client.AcquireOptions;
import dev.ratekeeper.client.RateLimitGate;
import dev.ratekeeper.client.RatekeeperClient;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.FilterConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * A Jakarta Servlet filter (Servlet 5.0 or later) that acquires a permit of ratekeeper for each
 * request. Granted: the request goes on, its response carrying the {@code RateLimit} and {@code
 * RateLimit-Policy} headers. Denied: 429 with {@code Retry-After} and the rate-limit headers (503
 * when ratekeeper could not be reached and the filter fails closed). What to answer is decided by
 * {@link RateLimitGate}.
 *
 * <p>Registered in code, with the resource fixed or taken from the request, and the key (of a
 * {@code per_key} policy) a function of the request; a resource function returning null lets the
 * request through unlimited:
 *
 * <pre>{@code
 * servletContext
 *     .addFilter("ratelimit", new RateLimitFilter(client, "orders.create", req -> req.getHeader("X-User")))
 *     .addMappingForUrlPatterns(null, false, "/orders/*");
 * }</pre>
 *
 * <p>Or declared in {@code web.xml} with init parameters (the filter then makes its own client,
 * closed in {@link #destroy()}): {@code resource} (required); {@code key}: {@code none} (the
 * default), {@code remote-addr}, or {@code header:<Name>}; {@code url} (default: the environment
 * variable {@code RATEKEEPER_URL}, else {@code http://127.0.0.1:8080}); {@code api-key-env}: the
 * environment variable holding the API key (default {@code RATEKEEPER_API_KEY}; the key itself
 * never goes in {@code web.xml}); {@code fail-open} ({@code true}/{@code false}); {@code
 * timeout-ms}.
 */
public class RateLimitFilter implements Filter {

  private RateLimitGate gate;
  private Function<HttpServletRequest, String> resource;
  private Function<HttpServletRequest, String> key;
  private RatekeeperClient ownClient;

  /** A filter configured by init parameters (see the class documentation). */
  public RateLimitFilter() {}

  /**
   * A filter for one resource.
   *
   * @param client the client (shared; the filter does not close it)
   * @param resource the resource every request acquires
   * @param key the key of a request (null: none), or null for no key
   */
  public RateLimitFilter(
    RatekeeperClient client,
    String resource,
    Function<HttpServletRequest, String> key
  ) {
    this(client, fixed(Objects.requireNonNull(resource, "resource")), key, AcquireOptions.DEFAULT);
  }

  /**
   * A filter taking the resource and key from each request.
   *
   * @param client the client (shared; the filter does not close it)
   * @param resource the resource of a request, or null to let it through unlimited
   * @param key the key of a request (null: none), or null for no key
   * @param options permits, fail-open, timeout and wait bound of each acquire
   */
  public RateLimitFilter(
    RatekeeperClient client,
    Function<HttpServletRequest, String> resource,
    Function<HttpServletRequest, String> key,
    AcquireOptions options
  ) {
    this.gate = new RateLimitGate(client, options);
    this.resource = Objects.requireNonNull(resource, "resource");
    this.key = key == null ? fixed(null) : key;
  }

  private static Function<HttpServletRequest, String> fixed(String value) {
    return request -> value;
  }

  @Override
  public void init(FilterConfig config) throws ServletException {
    if (gate != null) {
      return; // made in code
    }
    String name = config.getInitParameter("resource");
    if (name == null || name.isEmpty()) {
      throw new ServletException("RateLimitFilter: the init parameter 'resource' is required");
    }
    resource = fixed(name);
    key = keyFunction(config.getInitParameter("key"));
    String url = config.getInitParameter("url");
    if (url == null) {
      url = System.getenv("RATEKEEPER_URL");
    }
    if (url == null) {
      url = "http://127.0.0.1:8080";
    }
    String keyEnv = config.getInitParameter("api-key-env");
    RatekeeperClient.Builder builder = RatekeeperClient.builder()
      .url(url)
      .apiKey(System.getenv(keyEnv == null ? "RATEKEEPER_API_KEY" : keyEnv));
    String failOpen = config.getInitParameter("fail-open");
    if (failOpen != null) {
      builder.failOpen(Boolean.parseBoolean(failOpen.trim()));
    }
    String timeoutMs = config.getInitParameter("timeout-ms");
    try {
      if (timeoutMs != null) {
        builder.timeout(Duration.ofMillis(Long.parseLong(timeoutMs.trim())));
      }
      ownClient = builder.build();
    } catch (IllegalArgumentException e) {
      throw new ServletException("RateLimitFilter: " + e.getMessage(), e);
    }
    gate = new RateLimitGate(ownClient);
  }

  /** The key function named by the {@code key} init parameter. */
  static Function<HttpServletRequest, String> keyFunction(String spec) throws ServletException {
    if (spec == null || spec.isEmpty() || spec.equals("none")) {
      return fixed(null);
    }
    if (spec.equals("remote-addr")) {
      return HttpServletRequest::getRemoteAddr;
    }
    if (spec.startsWith("header:") && spec.length() > "header:".length()) {
      String header = spec.substring("header:".length());
      return request -> request.getHeader(header);
    }
    throw new ServletException(
      "RateLimitFilter: 'key' must be none, remote-addr or header:<Name>, not " + spec
    );
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
    throws IOException, ServletException {
    if (gate == null) {
      throw new ServletException("RateLimitFilter: not initialised");
    }
    if (!(request instanceof HttpServletRequest) || !(response instanceof HttpServletResponse)) {
      chain.doFilter(request, response);
      return;
    }
    HttpServletRequest req = (HttpServletRequest) request;
    HttpServletResponse res = (HttpServletResponse) response;
    String name = resource.apply(req);
    if (name == null) {
      chain.doFilter(request, response);
      return;
    }
    RateLimitGate.Verdict verdict = gate.decide(name, key.apply(req));
    for (Map.Entry<String, String> header : verdict.headers().entrySet()) {
      res.setHeader(header.getKey(), header.getValue());
    }
    if (verdict.proceed()) {
      chain.doFilter(request, response);
      return;
    }
    res.setStatus(verdict.status());
    res.setContentType(RateLimitGate.Verdict.PROBLEM_JSON);
    res.setCharacterEncoding("UTF-8");
    res.getWriter().write(verdict.body());
  }

  @Override
  public void destroy() {
    if (ownClient != null) {
      ownClient.close();
      ownClient = null;
    }
  }
}
