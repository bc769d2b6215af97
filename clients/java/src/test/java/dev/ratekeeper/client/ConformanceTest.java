package dev.ratekeeper.client;

import dev.ratekeeper.client.testkit.DynamicTest;
import dev.ratekeeper.client.testkit.SkipException;
import dev.ratekeeper.client.testkit.TestFactory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * The language-neutral conformance scenarios ({@code clients/conformance/scenarios/*.json}),
 * played with this library against the server of the fixture named by {@code
 * RK_CONFORMANCE_FIXTURE}: one test per scenario, skipped when that variable is unset.
 */
public final class ConformanceTest {

  private static final String BAD_KEY = "rk_live_madeupmadeupmadeupmadeupmadeup0";

  @TestFactory
  public static List<DynamicTest> scenarios() throws IOException {
    Path dir = scenariosDir();
    String fixturePath = System.getenv("RK_CONFORMANCE_FIXTURE");
    List<DynamicTest> tests = new ArrayList<>();
    if (dir == null || !Files.isDirectory(dir)) {
      tests.add(
        new DynamicTest("conformance", () -> {
          if (fixturePath == null || fixturePath.isEmpty()) {
            throw new SkipException("RK_CONFORMANCE_FIXTURE is not set");
          }
          throw new AssertionError("no scenarios directory: " + dir);
        })
      );
      return tests;
    }
    List<Path> files;
    try (Stream<Path> list = Files.list(dir)) {
      files = list
        .filter(p -> p.getFileName().toString().endsWith(".json"))
        .sorted()
        .collect(Collectors.toList());
    }
    for (Path file : files) {
      String stem = file.getFileName().toString().replaceFirst("\\.json$", "");
      tests.add(
        new DynamicTest("conformance." + stem, () -> {
          if (fixturePath == null || fixturePath.isEmpty()) {
            throw new SkipException("RK_CONFORMANCE_FIXTURE is not set");
          }
          Map<String, Object> fixture = Json.parseObject(read(Paths.get(fixturePath)));
          List<String> problems = new Scenario(fixture).run(Json.parseObject(read(file)));
          if (!problems.isEmpty()) {
            throw new AssertionError(String.join("\n     ", problems));
          }
        })
      );
    }
    return tests;
  }

  private static String read(Path path) throws IOException {
    return new String(Files.readAllBytes(path), StandardCharsets.UTF_8);
  }

  /** RK_CONFORMANCE_SCENARIOS, else clients/conformance/scenarios of the enclosing repo. */
  private static Path scenariosDir() {
    String env = System.getenv("RK_CONFORMANCE_SCENARIOS");
    if (env != null && !env.isEmpty()) {
      return Paths.get(env);
    }
    Path dir = Paths.get("").toAbsolutePath();
    while (dir != null) {
      Path candidate = dir.resolve("clients/conformance/scenarios");
      if (Files.isDirectory(candidate)) {
        return candidate;
      }
      dir = dir.getParent();
    }
    return null;
  }

  /** One scenario's run: a fresh client per (role, server), so no cache leaks in or out. */
  private static final class Scenario {

    private final String prefix;
    private final Map<String, String> keys = new LinkedHashMap<>();
    private final Map<String, String> urls = new LinkedHashMap<>();
    private final Map<String, RatekeeperClient> clients = new LinkedHashMap<>();
    private final List<Object> outcomes = new ArrayList<>();
    private final List<String> problems = new ArrayList<>();

    @SuppressWarnings("unchecked")
    Scenario(Map<String, Object> fixture) {
      prefix = (String) fixture.get("prefix");
      Map<String, Object> fixtureKeys = (Map<String, Object>) fixture.get("keys");
      keys.put("caller", (String) fixtureKeys.get("caller"));
      keys.put("stranger", (String) fixtureKeys.get("stranger"));
      keys.put("bad_key", BAD_KEY);
      urls.put("real", (String) fixture.get("url"));
      urls.put("unreachable", (String) fixture.get("unreachable_url"));
    }

    private RatekeeperClient client(String role, String server) {
      String id = role + "@" + server;
      return clients.computeIfAbsent(id, k -> {
        String url = urls.get(server);
        String key = keys.get(role);
        if (url == null || key == null) {
          throw new AssertionError("unknown role or server: " + id);
        }
        return RatekeeperClient.builder()
          .url(url)
          .apiKey(key)
          .timeout(Duration.ofSeconds(5))
          .build();
      });
    }

    @SuppressWarnings("unchecked")
    List<String> run(Map<String, Object> scenario) {
      try {
        List<Object> steps = (List<Object>) scenario.get("steps");
        for (int i = 0; i < steps.size(); i++) {
          runStep(i, (Map<String, Object>) steps.get(i));
        }
      } finally {
        for (RatekeeperClient c : clients.values()) {
          c.close();
        }
      }
      return problems;
    }

    @SuppressWarnings("unchecked")
    private void runStep(int index, Map<String, Object> step) {
      Map<String, Object> expect = step.containsKey("expect")
        ? (Map<String, Object>) step.get("expect")
        : Map.of();
      String op = (String) step.get("op");
      String label = "step " + index + " (" + op + " " + step.getOrDefault("resource", "") + ")";
      long started = System.nanoTime();
      Object got;
      try {
        got = perform(step);
      } catch (RatekeeperException e) {
        outcomes.add(e);
        if (!expect.containsKey("error")) {
          problems.add(label + ": unexpected " + name(e) + " " + e.status() + ": " + e.detail());
          return;
        }
        checkValue(label + ".error", expect.get("error"), name(e));
        if (expect.containsKey("error_field")) {
          checkValue(label + ".error_field", expect.get("error_field"), e.field());
        }
        return;
      }
      long elapsedMs = (System.nanoTime() - started) / 1_000_000;
      outcomes.add(got);
      Map<String, Object> view = view(got);
      if (expect.containsKey("error")) {
        problems.add(label + ": want " + expect.get("error") + ", got " + view);
        return;
      }
      checkDecision(label, expect, view);
      Long waitMs = Json.longField(step, "wait_ms");
      if (waitMs != null && !Boolean.TRUE.equals(view.get("allowed")) && elapsedMs > waitMs) {
        problems.add(label + ": a wait of " + waitMs + " ms took " + elapsedMs + " ms");
      }
    }

    private String resource(Object name) {
      return prefix + "." + name;
    }

    @SuppressWarnings("unchecked")
    private Object perform(Map<String, Object> step) {
      String role = step.containsKey("as") ? (String) step.get("as") : "caller";
      String server = step.containsKey("server") ? (String) step.get("server") : "real";
      RatekeeperClient client = client(role, server);
      String op = (String) step.get("op");
      String resource = step.containsKey("resource") ? resource(step.get("resource")) : null;
      AcquireOptions.Builder options = AcquireOptions.builder();
      options.key(Json.stringField(step, "key"));
      Long permits = Json.longField(step, "permits");
      if (Json.boolField(step, "fail_open") != null) {
        options.failOpen(Json.boolField(step, "fail_open"));
      }
      Long timeoutMs = Json.longField(step, "timeout_ms");
      if (timeoutMs != null) {
        options.timeout(Duration.ofMillis(timeoutMs));
      }
      Long waitMs = Json.longField(step, "wait_ms");
      if (waitMs != null) {
        options.waitFor(Duration.ofMillis(waitMs));
      }
      switch (op) {
        case "acquire":
          if (permits != null) {
            options.permits(permits);
          }
          return client.acquire(resource, options.build());
        case "check":
          return client.check(resource, options.build());
        case "acquire_all": {
          List<Item> items = new ArrayList<>();
          for (Object o : (List<Object>) step.get("items")) {
            Map<String, Object> item = (Map<String, Object>) o;
            Long itemPermits = Json.longField(item, "permits");
            items.add(
              Item.of(
                resource(item.get("resource")),
                Json.stringField(item, "key"),
                itemPermits == null ? 1 : itemPermits
              )
            );
          }
          return client.acquireAll(items, options.waitFor(null).build());
        }
        case "refund":
          options.permits(permits == null ? 1 : permits);
          return client.refund(resource, options.build());
        case "release": {
          int from = ((Number) step.get("lease_id_from")).intValue();
          Object source = outcomes.get(from);
          String leaseId = source instanceof Decision
            ? ((Decision) source).leaseId().orElse(null)
            : null;
          if (leaseId == null) {
            throw new AssertionError("step " + from + " has no lease_id to release");
          }
          return client.release(resource, leaseId, options.build());
        }
        case "lease":
          try (Lease lease = client.lease(resource, options.build())) {
            return lease.decision();
          } catch (RateLimitedException e) {
            return e.decision();
          }
        default:
          throw new AssertionError("unknown op " + op);
      }
    }

    /** The expectation name of an exception's type. */
    private static String name(RatekeeperException e) {
      if (e instanceof BadRequestException) {
        return "BadRequest";
      } else if (e instanceof UnauthorizedException) {
        return "Unauthorized";
      } else if (e instanceof ForbiddenException) {
        return "Forbidden";
      } else if (e instanceof NotFoundException) {
        return "NotFound";
      } else if (e instanceof ConflictException) {
        return "Conflict";
      } else if (e instanceof InvalidException) {
        return "Invalid";
      } else if (e instanceof UnavailableException) {
        return "Unavailable";
      } else if (e instanceof TransportException) {
        return "TransportError";
      } else if (e instanceof RateLimitedException) {
        return "RateLimited";
      }
      return "UnexpectedResponse";
    }

    /** A result as the field names of the scenarios see it. */
    private static Map<String, Object> view(Object got) {
      Map<String, Object> view = new LinkedHashMap<>();
      if (got instanceof Decision) {
        Decision d = (Decision) got;
        view.put("allowed", d.allowed());
        view.put("remaining", d.remaining().isPresent() ? d.remaining().getAsLong() : null);
        view.put("limit", d.limit().isPresent() ? d.limit().getAsLong() : null);
        view.put("retry_after_ms", d.retryAfterMsOrNull());
        view.put(
          "reset_after_ms",
          d.resetAfterMs().isPresent() ? d.resetAfterMs().getAsLong() : null
        );
        view.put(
          "policy_version",
          d.policyVersion().isPresent() ? d.policyVersion().getAsLong() : null
        );
        view.put("enforced", d.enforced());
        view.put("degraded", d.degraded());
        view.put("shadow_denied", d.shadowDenied());
        view.put("cached", d.cached());
        view.put("lease_id", d.leaseId().orElse(null));
        view.put("headers", d.headers());
      } else if (got instanceof AllDecision) {
        AllDecision all = (AllDecision) got;
        view.put("allowed", all.allowed());
        view.put("degraded", all.degraded());
        List<Object> results = new ArrayList<>();
        for (Decision d : all.results()) {
          results.add(view(d));
        }
        view.put("results", results);
        view.put("headers", all.headers());
      } else if (got instanceof Released) {
        Released r = (Released) got;
        view.put("released", r.released());
        view.put("permits", r.permits());
        view.put("remaining", r.remaining());
        view.put("headers", Map.of());
      }
      return view;
    }

    @SuppressWarnings("unchecked")
    private void checkDecision(String label, Map<String, Object> expect, Map<String, Object> got) {
      for (Map.Entry<String, Object> e : expect.entrySet()) {
        String field = e.getKey();
        Object want = e.getValue();
        switch (field) {
          case "error":
          case "error_field":
            break;
          case "results": {
            List<Object> wantResults = (List<Object>) want;
            Object results = got.get("results");
            if (!(results instanceof List) || ((List<?>) results).size() != wantResults.size()) {
              problems.add(
                label + ".results: want " + wantResults.size() + " results, got " + results
              );
              break;
            }
            for (int i = 0; i < wantResults.size(); i++) {
              checkDecision(
                label + ".results[" + i + "]",
                (Map<String, Object>) wantResults.get(i),
                (Map<String, Object>) ((List<?>) results).get(i)
              );
            }
            break;
          }
          case "headers": {
            Map<String, String> have = new LinkedHashMap<>();
            Object headers = got.get("headers");
            if (headers instanceof Map) {
              ((Map<String, String>) headers).forEach((k, v) ->
                have.put(k.toLowerCase(Locale.ROOT), v)
              );
            }
            for (Map.Entry<String, Object> h : ((Map<String, Object>) want).entrySet()) {
              String value = have.get(h.getKey().toLowerCase(Locale.ROOT));
              if ("present".equals(h.getValue())) {
                if (value == null) {
                  problems.add(label + ": header " + h.getKey() + " absent");
                }
              } else if (!String.valueOf(h.getValue()).equals(value)) {
                problems.add(
                  label + ": header " + h.getKey() + ": want " + h.getValue() + ", got " + value
                );
              }
            }
            break;
          }
          case "has_lease_id": {
            Object id = got.get("lease_id");
            checkValue(label + ".has_lease_id", want, id != null && !id.toString().isEmpty());
            break;
          }
          default:
            if (!got.containsKey(field)) {
              problems.add(label + "." + field + ": not a field of " + got);
            } else {
              checkValue(label + "." + field, want, got.get(field));
            }
        }
      }
    }

    private void checkValue(String label, Object want, Object got) {
      if (want instanceof Map) {
        Map<?, ?> range = (Map<?, ?>) want;
        if (!(got instanceof Number)) {
          problems.add(label + ": want " + Json.write(want) + ", got " + got);
          return;
        }
        double value = ((Number) got).doubleValue();
        Object min = range.get("min");
        Object max = range.get("max");
        if (min instanceof Number && value < ((Number) min).doubleValue()) {
          problems.add(label + ": want at least " + min + ", got " + got);
        }
        if (max instanceof Number && value > ((Number) max).doubleValue()) {
          problems.add(label + ": want at most " + max + ", got " + got);
        }
        return;
      }
      if (want instanceof Number && got instanceof Number) {
        if (((Number) want).doubleValue() != ((Number) got).doubleValue()) {
          problems.add(label + ": want " + want + ", got " + got);
        }
        return;
      }
      if (want == null ? got != null : !want.equals(got)) {
        problems.add(label + ": want " + want + ", got " + got);
      }
    }
  }
}
