package dev.ratekeeper.client;

import java.util.Collections;
import java.util.List;

/**
 * The base of every error this library raises (unchecked). An error reply of the server
 * ({@code application/problem+json}) is raised as the subclass for its status; a status this
 * library has no subclass for is raised as this class itself.
 */
public class RatekeeperException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /** The prefix of the server's problem types, {@code urn:ratekeeper:problem:}. */
  public static final String TYPE_PREFIX = "urn:ratekeeper:problem:";

  private final int status;
  private final String type;
  private final String title;
  private final String detail;
  private final transient List<FieldError> errors;

  /**
   * @param status the HTTP status, 0 when no reply was received
   * @param type the problem type URI, or null
   * @param title the problem title, or null
   * @param detail the problem detail, or null
   * @param errors the invalid fields, if any
   * @param cause the underlying exception, or null
   */
  public RatekeeperException(
    int status,
    String type,
    String title,
    String detail,
    List<FieldError> errors,
    Throwable cause
  ) {
    super(message(status, title, detail), cause);
    this.status = status;
    this.type = type;
    this.title = title;
    this.detail = detail;
    this.errors = errors == null
      ? Collections.emptyList()
      : Collections.unmodifiableList(List.copyOf(errors));
  }

  private static String message(int status, String title, String detail) {
    StringBuilder out = new StringBuilder();
    if (status != 0) {
      out.append(status);
    }
    if (title != null && !title.isEmpty()) {
      if (out.length() > 0) {
        out.append(' ');
      }
      out.append(title);
    }
    if (detail != null && !detail.isEmpty()) {
      if (out.length() > 0) {
        out.append(": ");
      }
      out.append(detail);
    }
    return out.toString();
  }

  /** The HTTP status of the reply, 0 when no reply was received. */
  public int status() {
    return status;
  }

  /** The problem type URI ({@code urn:ratekeeper:problem:<kind>}), or null when none. */
  public String type() {
    return type;
  }

  /** The kind of problem: the type URI without its prefix (e.g. {@code lease-not-held}). */
  public String kind() {
    if (type == null) {
      return null;
    }
    return type.startsWith(TYPE_PREFIX) ? type.substring(TYPE_PREFIX.length()) : type;
  }

  /** The problem's title, or null. */
  public String title() {
    return title;
  }

  /** The problem's detail, or null. */
  public String detail() {
    return detail;
  }

  /** The invalid fields the server named, in its order (empty when none). */
  public List<FieldError> errors() {
    return errors == null ? Collections.emptyList() : errors; // null after deserialization
  }

  /** The first invalid field's name, or null when the reply named none. */
  public String field() {
    List<FieldError> all = errors();
    return all.isEmpty() ? null : all.get(0).field();
  }
}
