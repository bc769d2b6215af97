package dev.ratekeeper.client;

import java.util.Collections;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;

/**
 * The answer to an acquire (or a check or a refund): granted or not, with the numbers the server
 * gave. A denial is a decision too, not an exception.
 *
 * <p>A <em>degraded</em> decision was made without the server's word: no reply came in time (or
 * the server could not be reached), and {@link #allowed()} is the fail-open setting of the call.
 * A <em>cached</em> decision is a denial answered from the client's denial cache, without a
 * request.
 */
public final class Decision {

  /** The names of the headers a decision keeps, as the server sends them. */
  static final String[] HEADER_NAMES = { "RateLimit", "RateLimit-Policy", "Retry-After" };

  private final int status;
  private final boolean allowed;
  private final Long remaining;
  private final Long limit;
  private final Long retryAfterMs;
  private final Long resetAfterMs;
  private final Long policyVersion;
  private final Boolean enforced;
  private final boolean degraded;
  private final boolean shadowDenied;
  private final boolean cached;
  private final String leaseId;
  private final Map<String, String> headers;

  Decision(
    int status,
    boolean allowed,
    Long remaining,
    Long limit,
    Long retryAfterMs,
    Long resetAfterMs,
    Long policyVersion,
    Boolean enforced,
    boolean degraded,
    boolean shadowDenied,
    boolean cached,
    String leaseId,
    Map<String, String> headers
  ) {
    this.status = status;
    this.allowed = allowed;
    this.remaining = remaining;
    this.limit = limit;
    this.retryAfterMs = retryAfterMs;
    this.resetAfterMs = resetAfterMs;
    this.policyVersion = policyVersion;
    this.enforced = enforced;
    this.degraded = degraded;
    this.shadowDenied = shadowDenied;
    this.cached = cached;
    this.leaseId = leaseId;
    TreeMap<String, String> copy = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    if (headers != null) {
      copy.putAll(headers);
    }
    this.headers = Collections.unmodifiableMap(copy);
  }

  /** A decision from a reply's JSON object and headers. */
  static Decision fromJson(int status, Map<String, Object> body, Map<String, String> headers) {
    Boolean allowed = Json.boolField(body, "allowed");
    if (allowed == null) {
      throw new RatekeeperException(
        status,
        null,
        "Unexpected response",
        "no \"allowed\" in the reply",
        null,
        null
      );
    }
    return new Decision(
      status,
      allowed,
      Json.longField(body, "remaining"),
      Json.longField(body, "limit"),
      Json.longField(body, "retry_after_ms"),
      Json.longField(body, "reset_after_ms"),
      Json.longField(body, "policy_version"),
      Json.boolField(body, "enforced"),
      Boolean.TRUE.equals(Json.boolField(body, "degraded")),
      Boolean.TRUE.equals(Json.boolField(body, "shadow_denied")),
      false,
      Json.stringField(body, "lease_id"),
      headers
    );
  }

  /** A decision made without the server: no reply came. */
  static Decision degraded(boolean allowed) {
    return new Decision(
      0,
      allowed,
      null,
      null,
      null,
      null,
      null,
      null,
      true,
      false,
      false,
      null,
      null
    );
  }

  /** The HTTP status of the reply (200 or 429), or 0 for a degraded or cached decision. */
  public int status() {
    return status;
  }

  /** Whether the permits were granted. */
  public boolean allowed() {
    return allowed;
  }

  /** The permits left after this decision, when the server said. */
  public OptionalLong remaining() {
    return optional(remaining);
  }

  /** The policy's capacity (or the caller's override of it), when the server said. */
  public OptionalLong limit() {
    return optional(limit);
  }

  /**
   * How long until the permits asked for can be granted, in milliseconds; 0 when granted or when
   * the server did not say.
   */
  public long retryAfterMs() {
    return retryAfterMs == null ? 0 : retryAfterMs;
  }

  /** {@link #retryAfterMs()} as the server sent it (null when absent). */
  Long retryAfterMsOrNull() {
    return retryAfterMs;
  }

  /** How long until the bucket is full again, in milliseconds, when the server said. */
  public OptionalLong resetAfterMs() {
    return optional(resetAfterMs);
  }

  /** The version of the policy that decided, when the server said. */
  public OptionalLong policyVersion() {
    return optional(policyVersion);
  }

  /** False when the policy is disabled (every acquire is granted); true otherwise. */
  public boolean enforced() {
    return enforced == null || enforced;
  }

  /** {@link #enforced()} as the server sent it (null when absent). */
  Boolean enforcedOrNull() {
    return enforced;
  }

  /** True when no reply came (timeout, refused, reset) or the server itself decided degraded. */
  public boolean degraded() {
    return degraded;
  }

  /** True when a policy in shadow mode granted what enforcing it would have denied. */
  public boolean shadowDenied() {
    return shadowDenied;
  }

  /** True when this denial was answered from the client's denial cache, without a request. */
  public boolean cached() {
    return cached;
  }

  /** The lease of a grant of a concurrency policy, to give back with a release. */
  public Optional<String> leaseId() {
    return Optional.ofNullable(leaseId);
  }

  /**
   * The rate-limit headers of the reply, raw, by name (case-insensitive): {@code RateLimit},
   * {@code RateLimit-Policy} and {@code Retry-After}, those that were sent.
   */
  public Map<String, String> headers() {
    return headers;
  }

  /** One rate-limit header of the reply (the name is case-insensitive). */
  public Optional<String> header(String name) {
    return Optional.ofNullable(headers.get(name));
  }

  private static OptionalLong optional(Long value) {
    return value == null ? OptionalLong.empty() : OptionalLong.of(value);
  }

  @Override
  public String toString() {
    StringBuilder out = new StringBuilder("Decision{allowed=").append(allowed);
    if (remaining != null) {
      out.append(", remaining=").append(remaining);
    }
    if (limit != null) {
      out.append(", limit=").append(limit);
    }
    if (retryAfterMs != null) {
      out.append(", retryAfterMs=").append(retryAfterMs);
    }
    if (resetAfterMs != null) {
      out.append(", resetAfterMs=").append(resetAfterMs);
    }
    if (policyVersion != null) {
      out.append(", policyVersion=").append(policyVersion);
    }
    if (enforced != null) {
      out.append(", enforced=").append(enforced);
    }
    if (degraded) {
      out.append(", degraded=true");
    }
    if (shadowDenied) {
      out.append(", shadowDenied=true");
    }
    if (cached) {
      out.append(", cached=true");
    }
    if (leaseId != null) {
      out.append(", leaseId=").append(leaseId);
    }
    return out.append('}').toString();
  }
}
