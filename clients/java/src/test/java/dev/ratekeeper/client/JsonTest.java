package dev.ratekeeper.client;

import static dev.ratekeeper.client.testkit.Assert.assertEquals;
import static dev.ratekeeper.client.testkit.Assert.assertThrows;
import static dev.ratekeeper.client.testkit.Assert.assertTrue;

import dev.ratekeeper.client.testkit.Test;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class JsonTest {

  @Test
  public void parsesScalars() {
    assertEquals(Boolean.TRUE, Json.parse("true"), "true");
    assertEquals(Boolean.FALSE, Json.parse(" false "), "false");
    assertEquals(null, Json.parse("null"), "null");
    assertEquals(0L, Json.parse("0"), "zero");
    assertEquals(-42L, Json.parse("-42"), "negative");
    assertEquals(1.5, Json.parse("1.5"), "fraction");
    assertEquals(-2.5e-3, Json.parse("-2.5E-3"), "exponent");
    assertEquals(100.0, Json.parse("1e2"), "exponent without fraction");
    assertEquals(Long.MAX_VALUE, Json.parse("9223372036854775807"), "long max");
    assertEquals(
      new BigInteger("9223372036854775808"),
      Json.parse("9223372036854775808"),
      "big integer"
    );
  }

  @Test
  public void parsesStringsWithEscapes() {
    assertEquals("a\"b\\c/d", Json.parse("\"a\\\"b\\\\c\\/d\""), "quote, backslash, slash");
    assertEquals("\b\f\n\r\t", Json.parse("\"\\b\\f\\n\\r\\t\""), "control escapes");
    assertEquals("é€", Json.parse("\"\\u00e9\\u20AC\""), "unicode escapes");
    assertEquals("\uD83D\uDE00", Json.parse("\"\\ud83d\\ude00\""), "surrogate pair");
    assertEquals("日本", Json.parse("\"日本\""), "raw non-ASCII");
    assertEquals("", Json.parse("\"\""), "empty");
  }

  @Test
  @SuppressWarnings("unchecked")
  public void parsesNestedValues() {
    Object v = Json.parse(
      "{\"a\": [1, {\"b\": null, \"c\": [true, []]}, \"x\"], \"d\": {}, \"e\": -0.5}"
    );
    Map<String, Object> m = (Map<String, Object>) v;
    assertEquals(Arrays.asList("a", "d", "e"), List.copyOf(m.keySet()), "keys in order");
    List<Object> a = (List<Object>) m.get("a");
    assertEquals(1L, a.get(0), "a[0]");
    Map<String, Object> inner = (Map<String, Object>) a.get(1);
    assertTrue(inner.containsKey("b") && inner.get("b") == null, "null member kept");
    assertEquals(Arrays.asList(true, List.of()), inner.get("c"), "nested array");
    assertEquals("x", a.get(2), "a[2]");
    assertEquals(Map.of(), m.get("d"), "empty object");
    assertEquals(-0.5, m.get("e"), "e");
  }

  @Test
  public void rejectsInvalidJson() {
    String[] bad = {
      "",
      " ",
      "{",
      "}",
      "[1,]",
      "[1 2]",
      "{\"a\" 1}",
      "{\"a\":1,}",
      "{a:1}",
      "01",
      "1.",
      ".5",
      "-",
      "1e",
      "+1",
      "tru",
      "nul",
      "\"abc",
      "\"\\x\"",
      "\"\\u12\"",
      "\"\\u12g4\"",
      "\"a\nb\"",
      "{} {}",
      "[1] x",
      "NaN",
      "'a'",
    };
    for (String s : bad) {
      assertThrows(Json.ParseException.class, () -> Json.parse(s), "invalid: " + s);
    }
  }

  @Test
  public void rejectsTooDeepNesting() {
    String deep = "[".repeat(Json.MAX_DEPTH + 1) + "]".repeat(Json.MAX_DEPTH + 1);
    assertThrows(Json.ParseException.class, () -> Json.parse(deep), "too deep");
    String ok = "[".repeat(Json.MAX_DEPTH) + "]".repeat(Json.MAX_DEPTH);
    Json.parse(ok);
  }

  @Test
  public void writesAndReadsBack() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("s", "q\"uo\\te\n\t\u0001 é \uD83D\uDE00");
    m.put("n", 42L);
    m.put("i", 7);
    m.put("d", 1.25);
    m.put("whole", 3.0);
    m.put("b", false);
    m.put("z", null);
    m.put("list", Arrays.asList(1L, "two", null, List.of()));
    m.put("map", Map.of("k", "v"));
    String json = Json.write(m);
    assertEquals(
      "{\"s\":\"q\\\"uo\\\\te\\n\\t\\u0001 é \uD83D\uDE00\",\"n\":42,\"i\":7,\"d\":1.25," +
      "\"whole\":3,\"b\":false,\"z\":null,\"list\":[1,\"two\",null,[]]," +
      "\"map\":{\"k\":\"v\"}}",
      json,
      "written"
    );
    Map<String, Object> back = Json.parseObject(json);
    assertEquals(m.get("s"), back.get("s"), "string round trip");
    assertEquals(42L, back.get("n"), "number round trip");
    assertEquals(1.25, back.get("d"), "double round trip");
    assertThrows(IllegalArgumentException.class, () -> Json.write(Double.NaN), "NaN is not JSON");
  }

  @Test
  public void fieldReaders() {
    Map<String, Object> m = Json.parseObject(
      "{\"a\":5,\"b\":5.0,\"c\":5.5,\"d\":\"x\",\"e\":true,\"f\":null}"
    );
    assertEquals(5L, Json.longField(m, "a"), "long");
    assertEquals(5L, Json.longField(m, "b"), "integral double");
    assertEquals(null, Json.longField(m, "c"), "fraction is not a long");
    assertEquals(null, Json.longField(m, "d"), "string is not a long");
    assertEquals(null, Json.longField(m, "missing"), "missing");
    assertEquals("x", Json.stringField(m, "d"), "string");
    assertEquals(Boolean.TRUE, Json.boolField(m, "e"), "bool");
    assertEquals(null, Json.boolField(m, "f"), "null bool");
  }
}
