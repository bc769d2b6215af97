package dev.ratekeeper.client;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** A scripted HTTP server on 127.0.0.1: answers requests with the replies given, in order. */
final class FakeServer implements AutoCloseable {

  /** A request the server got. */
  static final class Request {

    final String method;
    final String path;
    final Map<String, String> headers;
    final String body;

    Request(String method, String path, Map<String, String> headers, String body) {
      this.method = method;
      this.path = path;
      this.headers = headers;
      this.body = body;
    }

    Map<String, Object> json() {
      return Json.parseObject(body);
    }
  }

  private static final class Reply {

    final int status;
    final String body;
    final String contentType;
    final String[] headers;

    Reply(int status, String body, String contentType, String[] headers) {
      this.status = status;
      this.body = body;
      this.contentType = contentType;
      this.headers = headers;
    }
  }

  private final HttpServer server;
  private final List<Reply> script = new ArrayList<>();
  private final List<Request> requests = new ArrayList<>();
  private int next;

  FakeServer() throws IOException {
    server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    server.createContext("/", this::handle);
    server.start();
  }

  String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  /** Adds a JSON reply (headers as name, value pairs). */
  FakeServer reply(int status, String json, String... headers) {
    return add(new Reply(status, json, "application/json", headers));
  }

  /** Adds a problem+json reply. */
  FakeServer problem(int status, String json) {
    return add(new Reply(status, json, "application/problem+json", new String[0]));
  }

  /** Adds a reply of any content type. */
  FakeServer raw(int status, String body, String contentType) {
    return add(new Reply(status, body, contentType, new String[0]));
  }

  private synchronized FakeServer add(Reply r) {
    script.add(r);
    return this;
  }

  synchronized List<Request> requests() {
    return new ArrayList<>(requests);
  }

  synchronized int count() {
    return requests.size();
  }

  private void handle(HttpExchange exchange) throws IOException {
    String body = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
    Map<String, String> headers = new LinkedHashMap<>();
    exchange
      .getRequestHeaders()
      .forEach((k, v) -> headers.put(k.toLowerCase(Locale.ROOT), String.join(",", v)));
    Reply reply;
    synchronized (this) {
      requests.add(
        new Request(exchange.getRequestMethod(), exchange.getRequestURI().getPath(), headers, body)
      );
      if (script.isEmpty()) {
        reply = new Reply(500, "{}", "application/json", new String[0]);
      } else {
        reply = script.get(Math.min(next, script.size() - 1));
        next++;
      }
    }
    byte[] bytes = reply.body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().set("Content-Type", reply.contentType);
    for (int i = 0; i + 1 < reply.headers.length; i += 2) {
      exchange.getResponseHeaders().set(reply.headers[i], reply.headers[i + 1]);
    }
    exchange.sendResponseHeaders(reply.status, bytes.length == 0 ? -1 : bytes.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(bytes);
    }
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
