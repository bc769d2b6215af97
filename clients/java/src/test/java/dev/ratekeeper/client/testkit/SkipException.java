package dev.ratekeeper.client.testkit;

/** Thrown by a test that does not apply here: counted as skipped, not failed. */
public final class SkipException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  public SkipException(String reason) {
    super(reason);
  }
}
