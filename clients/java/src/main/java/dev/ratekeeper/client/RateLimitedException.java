package dev.ratekeeper.client;

/**
 * Raised by {@link RatekeeperClient#lease} when the permit is not granted: denied by the policy,
 * or not reachable and failing closed ({@link Decision#degraded()}). It carries the {@link
 * Decision}, with {@link Decision#retryAfterMs()}. Its status is 429 for a denial and 0 for a
 * degraded one.
 */
public class RateLimitedException extends RatekeeperException {

  private static final long serialVersionUID = 1L;

  private final transient Decision decision;

  /**
   * @param resource the resource asked for
   * @param decision the decision that did not grant it
   */
  public RateLimitedException(String resource, Decision decision) {
    super(
      decision.degraded() ? 0 : 429,
      null,
      decision.degraded() ? "Not granted (degraded)" : "Rate limited",
      resource + ": retry after " + decision.retryAfterMs() + " ms",
      null,
      null
    );
    this.decision = decision;
  }

  /** The decision that did not grant the permit. */
  public Decision decision() {
    return decision;
  }
}
