package dev.ratekeeper.client;

import java.util.List;

/** 404: no such policy, or (on release) no such lease held ({@code lease-not-held}). */
public class NotFoundException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  /** Made by the client from a problem reply; see {@link RatekeeperException}. */
  public NotFoundException(
    int status,
    String type,
    String title,
    String detail,
    List<FieldError> errors
  ) {
    super(status, type, title, detail, errors, null);
  }
}
