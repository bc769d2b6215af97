package dev.ratekeeper.client;

import java.util.List;

/** 403: the key's application is not allowed to use this policy. */
public class ForbiddenException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  /** Made by the client from a problem reply; see {@link RatekeeperException}. */
  public ForbiddenException(
    int status,
    String type,
    String title,
    String detail,
    List<FieldError> errors
  ) {
    super(status, type, title, detail, errors, null);
  }
}
