package dev.ratekeeper.client;

import java.util.List;

/** 409: the request does not fit the policy, e.g. a release on a policy that hands out no leases ({@code not-a-lease-policy}). */
public class ConflictException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  /** Made by the client from a problem reply; see {@link RatekeeperException}. */
  public ConflictException(
    int status,
    String type,
    String title,
    String detail,
    List<FieldError> errors
  ) {
    super(status, type, title, detail, errors, null);
  }
}
