package dev.ratekeeper.client;

import java.util.List;

/** 503: the server cannot decide (Redis unreachable and the policy fails closed). */
public class UnavailableException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  /** Made by the client from a problem reply; see {@link RatekeeperException}. */
  public UnavailableException(
    int status,
    String type,
    String title,
    String detail,
    List<FieldError> errors
  ) {
    super(status, type, title, detail, errors, null);
  }
}
