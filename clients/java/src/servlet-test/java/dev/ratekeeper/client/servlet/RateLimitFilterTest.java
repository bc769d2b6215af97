package dev.ratekeeper.client.servlet;

import static dev.ratekeeper.client.testkit.Assert.assertEquals;
import static dev.ratekeeper.client.testkit.Assert.assertFalse;
import static dev.ratekeeper.client.testkit.Assert.assertThrows;
import static dev.ratekeeper.client.testkit.Assert.assertTrue;

import com.sun.net.httpserver.HttpServer;
import dev.ratekeeper.client.AcquireOptions;
import dev.ratekeeper.client.RatekeeperClient;
import dev.ratekeeper.client.testkit.Test;
import jakarta.servlet.FilterChain;
import jakarta.servlet.FilterConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The filter against stand-ins of the servlet objects (dynamic proxies). */
public final class RateLimitFilterTest {

  /** What the filter did to the response. */
  private static final class Recorded {

    int status = 200;
    final Map<String, String> headers = new LinkedHashMap<>();
    String contentType;
    final StringWriter body = new StringWriter();
    boolean chained;
  }

  private static HttpServletRequest request(Map<String, String> headers) {
    return (HttpServletRequest) Proxy.newProxyInstance(
      RateLimitFilterTest.class.getClassLoader(),
      new Class<?>[] { HttpServletRequest.class },
      (proxy, method, args) -> {
        switch (method.getName()) {
          case "getHeader":
            return headers.get((String) args[0]);
          case "getRemoteAddr":
            return "192.0.2.7";
          case "getMethod":
            return "GET";
          case "getRequestURI":
            return "/orders";
          default:
            throw new UnsupportedOperationException(method.getName());
        }
      }
    );
  }

  private static HttpServletResponse response(Recorded r) {
    PrintWriter writer = new PrintWriter(r.body);
    return (HttpServletResponse) Proxy.newProxyInstance(
      RateLimitFilterTest.class.getClassLoader(),
      new Class<?>[] { HttpServletResponse.class },
      (proxy, method, args) -> {
        switch (method.getName()) {
          case "setStatus":
            r.status = (Integer) args[0];
            return null;
          case "setHeader":
            r.headers.put((String) args[0], (String) args[1]);
            return null;
          case "setContentType":
            r.contentType = (String) args[0];
            return null;
          case "setCharacterEncoding":
            return null;
          case "getWriter":
            return writer;
          case "isCommitted":
            return false;
          default:
            throw new UnsupportedOperationException(method.getName());
        }
      }
    );
  }

  private static Recorded run(RateLimitFilter filter, Map<String, String> headers)
    throws IOException, ServletException {
    Recorded r = new Recorded();
    FilterChain chain = (req, res) -> r.chained = true;
    filter.doFilter(request(headers), response(r), chain);
    return r;
  }

  private static int closedPort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  @Test
  public void deniedRequestsGet429WithHeaders() throws Exception {
    HttpServer server = HttpServer.create(
      new InetSocketAddress(InetAddress.getLoopbackAddress(), 0),
      0
    );
    List<String> bodies = new ArrayList<>();
    server.createContext("/", exchange -> {
      bodies.add(new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
      boolean first = bodies.size() == 1;
      byte[] reply = (first
          ? "{\"allowed\":true,\"remaining\":0,\"limit\":1,\"retry_after_ms\":0}"
          : "{\"allowed\":false,\"remaining\":0,\"limit\":1,\"retry_after_ms\":4000}").getBytes(
        StandardCharsets.UTF_8
      );
      exchange.getResponseHeaders().set("RateLimit-Policy", "\"orders\";q=1");
      exchange.getResponseHeaders().set("RateLimit", "\"orders\";r=0;t=4");
      if (!first) {
        exchange.getResponseHeaders().set("Retry-After", "4");
      }
      exchange.sendResponseHeaders(first ? 200 : 429, reply.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(reply);
      }
    });
    server.start();
    try (
      RatekeeperClient rk = RatekeeperClient.builder()
        .url("http://127.0.0.1:" + server.getAddress().getPort())
        .build()
    ) {
      RateLimitFilter filter = new RateLimitFilter(rk, "orders", req -> req.getHeader("X-User"));
      Recorded granted = run(filter, Map.of("X-User", "u1"));
      assertTrue(granted.chained, "granted request goes on");
      assertEquals("\"orders\";q=1", granted.headers.get("RateLimit-Policy"), "headers passed on");
      assertTrue(bodies.get(0).contains("\"key\":\"u1\""), "key from the request: " + bodies);
      Recorded denied = run(filter, Map.of("X-User", "u1"));
      assertFalse(denied.chained, "denied request stops");
      assertEquals(429, denied.status, "429");
      assertEquals("4", denied.headers.get("Retry-After"), "Retry-After");
      assertEquals("\"orders\";r=0;t=4", denied.headers.get("RateLimit"), "RateLimit");
      assertEquals("application/problem+json", denied.contentType, "problem+json");
      assertTrue(denied.body.toString().contains("429"), "body");
    } finally {
      server.stop(0);
    }
  }

  @Test
  public void unreachableServerFailsClosedOrOpen() throws Exception {
    try (
      RatekeeperClient rk = RatekeeperClient.builder()
        .url("http://127.0.0.1:" + closedPort())
        .timeout(Duration.ofMillis(500))
        .build()
    ) {
      Recorded closed = run(new RateLimitFilter(rk, "orders", null), Map.of());
      assertFalse(closed.chained, "fails closed by default");
      assertEquals(503, closed.status, "503");
      RateLimitFilter open = new RateLimitFilter(
        rk,
        req -> "orders",
        null,
        AcquireOptions.builder().failOpen(true).build()
      );
      Recorded r = run(open, Map.of());
      assertTrue(r.chained, "fails open when asked");
      Recorded skipped = run(
        new RateLimitFilter(rk, req -> null, null, AcquireOptions.DEFAULT),
        Map.of()
      );
      assertTrue(skipped.chained, "no resource: not limited");
    }
  }

  private static FilterConfig config(Map<String, String> params) {
    return new FilterConfig() {
      @Override
      public String getFilterName() {
        return "ratelimit";
      }

      @Override
      public String getInitParameter(String name) {
        return params.get(name);
      }
    };
  }

  @Test
  public void initParameters() throws Exception {
    assertThrows(
      ServletException.class,
      () -> new RateLimitFilter().init(config(Map.of())),
      "resource required"
    );
    assertThrows(
      ServletException.class,
      () -> RateLimitFilter.keyFunction("cookie:x"),
      "unknown key spec"
    );
    assertEquals(
      "v",
      RateLimitFilter.keyFunction("header:X-K").apply(request(Map.of("X-K", "v"))),
      "hdr"
    );
    assertEquals(
      "192.0.2.7",
      RateLimitFilter.keyFunction("remote-addr").apply(request(Map.of())),
      "addr"
    );
    assertEquals(null, RateLimitFilter.keyFunction("none").apply(request(Map.of())), "none");
    RateLimitFilter filter = new RateLimitFilter();
    filter.init(
      config(
        Map.of(
          "resource",
          "orders",
          "url",
          "http://127.0.0.1:" + closedPort(),
          "fail-open",
          "true",
          "timeout-ms",
          "300"
        )
      )
    );
    try {
      assertTrue(run(filter, Map.of()).chained, "configured to fail open");
    } finally {
      filter.destroy();
    }
  }
}
