package dev.ratekeeper.client;

import java.util.List;

/** 422: a field has an invalid value ({@code validation}); {@link #errors()} names each. */
public class InvalidException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  /** Made by the client from a problem reply; see {@link RatekeeperException}. */
  public InvalidException(
    int status,
    String type,
    String title,
    String detail,
    List<FieldError> errors
  ) {
    super(status, type, title, detail, errors, null);
  }
}
