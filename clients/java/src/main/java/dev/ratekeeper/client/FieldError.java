package dev.ratekeeper.client;

import java.util.Objects;

/** One invalid input field of a problem reply: the field as the request named it, and why. */
public final class FieldError {

  private final String field;
  private final String message;

  /**
   * @param field the field, as the request named it (for example {@code all[1].permits})
   * @param message what is wrong with it
   */
  public FieldError(String field, String message) {
    this.field = Objects.requireNonNull(field, "field");
    this.message = message == null ? "" : message;
  }

  /** The field, as the request named it. */
  public String field() {
    return field;
  }

  /** What is wrong with it. */
  public String message() {
    return message;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof FieldError)) {
      return false;
    }
    FieldError other = (FieldError) o;
    return field.equals(other.field) && message.equals(other.message);
  }

  @Override
  public int hashCode() {
    return Objects.hash(field, message);
  }

  @Override
  public String toString() {
    return field + ": " + message;
  }
}
