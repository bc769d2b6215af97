package dev.ratekeeper.client;

/**
 * No reply came: the server could not be reached, did not answer within the timeout, or the
 * connection broke. Acquires and checks do not raise it (they return a degraded {@link
 * Decision}); refunds and releases, which have no decision to report, do. Its {@link #status()}
 * is 0.
 */
public class TransportException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  /**
   * @param detail what happened
   * @param cause the underlying exception
   */
  public TransportException(String detail, Throwable cause) {
    super(0, null, "Transport error", detail, null, cause);
  }
}
