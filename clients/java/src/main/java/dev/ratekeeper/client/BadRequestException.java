package dev.ratekeeper.client;

import java.util.List;

/** 400: the request is malformed (broken JSON, an unknown field, a missing or invalid {@code resource}...). */
public class BadRequestException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  /** Made by the client from a problem reply; see {@link RatekeeperException}. */
  public BadRequestException(
    int status,
    String type,
    String title,
    String detail,
    List<FieldError> errors
  ) {
    super(status, type, title, detail, errors, null);
  }
}
