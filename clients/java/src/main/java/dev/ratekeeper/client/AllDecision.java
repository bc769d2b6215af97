package dev.ratekeeper.client;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The answer to {@link RatekeeperClient#acquireAll}: granted only when every item is, and one
 * {@link Decision} per item, in order. A denied call takes nothing from any bucket.
 */
public final class AllDecision {

  private final boolean allowed;
  private final List<Decision> results;
  private final boolean degraded;
  private final Map<String, String> headers;

  AllDecision(
    boolean allowed,
    List<Decision> results,
    boolean degraded,
    Map<String, String> headers
  ) {
    this.allowed = allowed;
    this.results = Collections.unmodifiableList(List.copyOf(results));
    this.degraded = degraded;
    TreeMap<String, String> copy = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    if (headers != null) {
      copy.putAll(headers);
    }
    this.headers = Collections.unmodifiableMap(copy);
  }

  /** Whether every item was granted. */
  public boolean allowed() {
    return allowed;
  }

  /** One decision per item, in the order of the items. */
  public List<Decision> results() {
    return results;
  }

  /** True when no reply came, and {@link #allowed()} is the call's fail-open setting. */
  public boolean degraded() {
    return degraded;
  }

  /**
   * The longest wait among the denied items, in milliseconds (0 when granted): when the whole
   * call could be granted at the earliest.
   */
  public long retryAfterMs() {
    long longest = 0;
    for (Decision d : results) {
      if (!d.allowed()) {
        longest = Math.max(longest, d.retryAfterMs());
      }
    }
    return longest;
  }

  /** The rate-limit headers of the reply (those of the most restrictive item). */
  public Map<String, String> headers() {
    return headers;
  }

  @Override
  public String toString() {
    return "AllDecision{allowed=" + allowed + ", results=" + results + "}";
  }
}
