package dev.ratekeeper.client;

/** The answer to {@link RatekeeperClient#release}: the permits given back and those now free. */
public final class Released {

  private final boolean released;
  private final long permits;
  private final long remaining;

  Released(boolean released, long permits, long remaining) {
    this.released = released;
    this.permits = permits;
    this.remaining = remaining;
  }

  /** True: the lease was held and is given back. */
  public boolean released() {
    return released;
  }

  /** The permits given back. */
  public long permits() {
    return permits;
  }

  /** The permits free after the release. */
  public long remaining() {
    return remaining;
  }

  @Override
  public String toString() {
    return "Released{permits=" + permits + ", remaining=" + remaining + "}";
  }
}
