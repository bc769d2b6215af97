package dev.ratekeeper.client;

import java.util.List;

/** 401: no API key, or an unknown, revoked or expired one. */
public class UnauthorizedException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  /** Made by the client from a problem reply; see {@link RatekeeperException}. */
  public UnauthorizedException(
    int status,
    String type,
    String title,
    String detail,
    List<FieldError> errors
  ) {
    super(status, type, title, detail, errors, null);
  }
}
