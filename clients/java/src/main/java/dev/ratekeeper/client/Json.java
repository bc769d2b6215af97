package dev.ratekeeper.client;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal, strict JSON reader and writer (RFC 8259), enough for the server's replies and the
 * client's requests, so that the library needs nothing beyond the JDK.
 *
 * <p>Reading yields {@code Map<String, Object>} (insertion-ordered) for objects, {@code
 * List<Object>} for arrays, {@link String}, {@link Boolean}, {@code null}, and for numbers a
 * {@link Long} when the number is an integer that fits, a {@link BigInteger} for a larger integer,
 * otherwise a {@link Double}. Writing takes the same types (any {@link Number}).
 */
final class Json {

  /** How deep arrays and objects may nest before the reader gives up. */
  static final int MAX_DEPTH = 256;

  private final String text;
  private int pos;

  private Json(String text) {
    this.text = text;
  }

  /** Thrown for text that is not one JSON value. */
  static final class ParseException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    ParseException(String message, int offset) {
      super(message + " at offset " + offset);
    }
  }

  /**
   * Parses one JSON value, with nothing but whitespace after it.
   *
   * @throws ParseException when the text is not valid JSON
   */
  static Object parse(String text) {
    Json reader = new Json(text);
    reader.skipWhitespace();
    Object value = reader.readValue(0);
    reader.skipWhitespace();
    if (reader.pos != text.length()) {
      throw reader.error("unexpected text after the value");
    }
    return value;
  }

  /** Parses text that must hold a JSON object. */
  @SuppressWarnings("unchecked")
  static Map<String, Object> parseObject(String text) {
    Object value = parse(text);
    if (!(value instanceof Map)) {
      throw new ParseException("expected a JSON object", 0);
    }
    return (Map<String, Object>) value;
  }

  private ParseException error(String message) {
    return new ParseException(message, pos);
  }

  private void skipWhitespace() {
    while (pos < text.length()) {
      char c = text.charAt(pos);
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        pos++;
      } else {
        break;
      }
    }
  }

  private Object readValue(int depth) {
    if (pos >= text.length()) {
      throw error("unexpected end of input");
    }
    char c = text.charAt(pos);
    switch (c) {
      case '{':
        return readObject(depth + 1);
      case '[':
        return readArray(depth + 1);
      case '"':
        return readString();
      case 't':
        expectWord("true");
        return Boolean.TRUE;
      case 'f':
        expectWord("false");
        return Boolean.FALSE;
      case 'n':
        expectWord("null");
        return null;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return readNumber();
        }
        throw error("unexpected character '" + c + "'");
    }
  }

  private void expectWord(String word) {
    if (!text.startsWith(word, pos)) {
      throw error("expected " + word);
    }
    pos += word.length();
  }

  private Map<String, Object> readObject(int depth) {
    if (depth > MAX_DEPTH) {
      throw error("nested too deep");
    }
    pos++; // {
    Map<String, Object> map = new LinkedHashMap<>();
    skipWhitespace();
    if (peek() == '}') {
      pos++;
      return map;
    }
    while (true) {
      skipWhitespace();
      if (peek() != '"') {
        throw error("expected a string key");
      }
      String key = readString();
      skipWhitespace();
      if (peek() != ':') {
        throw error("expected ':'");
      }
      pos++;
      skipWhitespace();
      map.put(key, readValue(depth));
      skipWhitespace();
      char c = peek();
      pos++;
      if (c == '}') {
        return map;
      }
      if (c != ',') {
        pos--;
        throw error("expected ',' or '}'");
      }
    }
  }

  private List<Object> readArray(int depth) {
    if (depth > MAX_DEPTH) {
      throw error("nested too deep");
    }
    pos++; // [
    List<Object> list = new ArrayList<>();
    skipWhitespace();
    if (peek() == ']') {
      pos++;
      return list;
    }
    while (true) {
      skipWhitespace();
      list.add(readValue(depth));
      skipWhitespace();
      char c = peek();
      pos++;
      if (c == ']') {
        return list;
      }
      if (c != ',') {
        pos--;
        throw error("expected ',' or ']'");
      }
    }
  }

  private char peek() {
    if (pos >= text.length()) {
      throw error("unexpected end of input");
    }
    return text.charAt(pos);
  }

  private String readString() {
    pos++; // opening quote
    StringBuilder out = new StringBuilder();
    while (true) {
      if (pos >= text.length()) {
        throw error("unterminated string");
      }
      char c = text.charAt(pos++);
      if (c == '"') {
        return out.toString();
      }
      if (c < 0x20) {
        pos--;
        throw error("control character in string");
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (pos >= text.length()) {
        throw error("unterminated escape");
      }
      char e = text.charAt(pos++);
      switch (e) {
        case '"':
          out.append('"');
          break;
        case '\\':
          out.append('\\');
          break;
        case '/':
          out.append('/');
          break;
        case 'b':
          out.append('\b');
          break;
        case 'f':
          out.append('\f');
          break;
        case 'n':
          out.append('\n');
          break;
        case 'r':
          out.append('\r');
          break;
        case 't':
          out.append('\t');
          break;
        case 'u':
          out.append(readHex4());
          break;
        default:
          pos--;
          throw error("invalid escape '\\" + e + "'");
      }
    }
  }

  private char readHex4() {
    if (pos + 4 > text.length()) {
      throw error("truncated \\u escape");
    }
    int value = 0;
    for (int i = 0; i < 4; i++) {
      int digit = Character.digit(text.charAt(pos + i), 16);
      if (digit < 0) {
        throw error("invalid \\u escape");
      }
      value = value * 16 + digit;
    }
    pos += 4;
    return (char) value;
  }

  private Number readNumber() {
    int start = pos;
    if (text.charAt(pos) == '-') {
      pos++;
    }
    if (pos >= text.length()) {
      throw error("truncated number");
    }
    if (text.charAt(pos) == '0') {
      pos++;
    } else if (isDigit()) {
      while (isDigit()) {
        pos++;
      }
    } else {
      throw error("expected a digit");
    }
    boolean integral = true;
    if (pos < text.length() && text.charAt(pos) == '.') {
      integral = false;
      pos++;
      if (!isDigit()) {
        throw error("expected a digit after '.'");
      }
      while (isDigit()) {
        pos++;
      }
    }
    if (pos < text.length() && (text.charAt(pos) == 'e' || text.charAt(pos) == 'E')) {
      integral = false;
      pos++;
      if (pos < text.length() && (text.charAt(pos) == '+' || text.charAt(pos) == '-')) {
        pos++;
      }
      if (!isDigit()) {
        throw error("expected a digit in the exponent");
      }
      while (isDigit()) {
        pos++;
      }
    }
    String literal = text.substring(start, pos);
    if (integral) {
      BigInteger big = new BigInteger(literal);
      if (big.bitLength() < 64) {
        return big.longValue();
      }
      return big;
    }
    return Double.parseDouble(literal);
  }

  private boolean isDigit() {
    return pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9';
  }

  /** Writes a value (maps, iterables, strings, numbers, booleans, null) as compact JSON. */
  static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(out, value);
    return out.toString();
  }

  private static void write(StringBuilder out, Object value) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String) {
      writeString(out, (String) value);
    } else if (value instanceof Boolean) {
      out.append(value.toString());
    } else if (value instanceof Double || value instanceof Float) {
      double d = ((Number) value).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        throw new IllegalArgumentException("JSON has no " + d);
      }
      if (d == Math.rint(d) && Math.abs(d) < 1e15) {
        out.append((long) d);
      } else {
        out.append(d);
      }
    } else if (value instanceof BigDecimal) {
      out.append(((BigDecimal) value).toString());
    } else if (value instanceof Number) {
      out.append(value.toString());
    } else if (value instanceof Map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
        if (!first) {
          out.append(',');
        }
        first = false;
        writeString(out, String.valueOf(entry.getKey()));
        out.append(':');
        write(out, entry.getValue());
      }
      out.append('}');
    } else if (value instanceof Iterable) {
      out.append('[');
      boolean first = true;
      for (Object item : (Iterable<?>) value) {
        if (!first) {
          out.append(',');
        }
        first = false;
        write(out, item);
      }
      out.append(']');
    } else {
      throw new IllegalArgumentException("cannot write " + value.getClass() + " as JSON");
    }
  }

  private static void writeString(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        case '\b':
          out.append("\\b");
          break;
        case '\f':
          out.append("\\f");
          break;
        default:
          if (c < 0x20 || c == '\u2028' || c == '\u2029') {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    out.append('"');
  }

  /** Reads a field of an object as a long, or null when absent, null or not an integer. */
  static Long longField(Map<String, Object> map, String name) {
    Object value = map.get(name);
    if (value instanceof Long) {
      return (Long) value;
    }
    if (value instanceof Number) {
      double d = ((Number) value).doubleValue();
      if (d == Math.rint(d) && !Double.isInfinite(d)) {
        return (long) d;
      }
    }
    return null;
  }

  /** Reads a field of an object as a boolean, or null when absent or not a boolean. */
  static Boolean boolField(Map<String, Object> map, String name) {
    Object value = map.get(name);
    return value instanceof Boolean ? (Boolean) value : null;
  }

  /** Reads a field of an object as a string, or null when absent or not a string. */
  static String stringField(Map<String, Object> map, String name) {
    Object value = map.get(name);
    return value instanceof String ? (String) value : null;
  }

  /** The objects in an array field (other elements skipped), empty when absent. */
  @SuppressWarnings("unchecked")
  static List<Map<String, Object>> objectsField(Map<String, Object> map, String name) {
    Object value = map.get(name);
    if (!(value instanceof List)) {
      return Collections.emptyList();
    }
    List<Map<String, Object>> out = new ArrayList<>();
    for (Object item : (List<Object>) value) {
      if (item instanceof Map) {
        out.add((Map<String, Object>) item);
      }
    }
    return out;
  }
}
