package dev.ratekeeper.client;

import java.time.Duration;

/**
 * Options of one call: permits, key, fail-open and timeout overrides, and how long to wait for a
 * denied permit. Immutable; made with {@link #builder()}:
 *
 * <pre>{@code
 * AcquireOptions.builder().permits(2).key("user-42").waitFor(Duration.ofSeconds(2)).build()
 * }</pre>
 */
public final class AcquireOptions {

  /** One permit, no key, the client's defaults, no wait. */
  public static final AcquireOptions DEFAULT = builder().build();

  private final long permits;
  private final String key;
  private final Boolean failOpen;
  private final Duration timeout;
  private final Duration waitFor;

  private AcquireOptions(Builder b) {
    this.permits = b.permits;
    this.key = b.key;
    this.failOpen = b.failOpen;
    this.timeout = b.timeout;
    this.waitFor = b.waitFor;
  }

  /** A builder with the defaults (one permit, no key, the client's defaults, no wait). */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder starting from these options. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.permits = permits;
    b.key = key;
    b.failOpen = failOpen;
    b.timeout = timeout;
    b.waitFor = waitFor;
    return b;
  }

  /** The permits asked for (0 is a check); for a refund, the permits given back. */
  public long permits() {
    return permits;
  }

  /** The key (of a {@code per_key} policy), or null. */
  public String key() {
    return key;
  }

  /** The fail-open override of this call, or null for the client's default. */
  public Boolean failOpen() {
    return failOpen;
  }

  /** The timeout of this call, or null for the client's default. */
  public Duration timeout() {
    return timeout;
  }

  /** How long a denied acquire may wait for its permits (null or zero: not at all). */
  public Duration waitFor() {
    return waitFor;
  }

  @Override
  public String toString() {
    return (
      "AcquireOptions{permits=" +
      permits +
      (key == null ? "" : ", key=" + key) +
      (failOpen == null ? "" : ", failOpen=" + failOpen) +
      (timeout == null ? "" : ", timeout=" + timeout) +
      (waitFor == null ? "" : ", waitFor=" + waitFor) +
      "}"
    );
  }

  /** Builds {@link AcquireOptions}. */
  public static final class Builder {

    private long permits = 1;
    private String key;
    private Boolean failOpen;
    private Duration timeout;
    private Duration waitFor;

    private Builder() {}

    /**
     * The permits asked for (default 1; 0 is a check). Not checked here: the server answers
     * values out of the policy's range with a 422 ({@link InvalidException}).
     */
    public Builder permits(long permits) {
      this.permits = permits;
      return this;
    }

    /** The key of a {@code per_key} policy (null for none). */
    public Builder key(String key) {
      this.key = key;
      return this;
    }

    /** Whether a call that gets no reply is granted (degraded); default: the client's. */
    public Builder failOpen(boolean failOpen) {
      this.failOpen = failOpen;
      return this;
    }

    /** The timeout of this call; default: the client's. */
    public Builder timeout(Duration timeout) {
      if (timeout != null && (timeout.isNegative() || timeout.isZero())) {
        throw new IllegalArgumentException("timeout must be positive");
      }
      this.timeout = timeout;
      return this;
    }

    /**
     * How long a denied acquire may wait for its permits: it sleeps for the denial's retry time
     * and asks again, as long as the permits can come within this bound; otherwise the denial is
     * returned at once.
     */
    public Builder waitFor(Duration waitFor) {
      if (waitFor != null && waitFor.isNegative()) {
        throw new IllegalArgumentException("waitFor must not be negative");
      }
      this.waitFor = waitFor;
      return this;
    }

    /** The options. */
    public AcquireOptions build() {
      return new AcquireOptions(this);
    }
  }
}
