package dev.ratekeeper.client;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.LongSupplier;

/**
 * Remembers recent denials so that a call that would surely be denied again is answered locally,
 * without a request. Thread-safe; bounded (expired entries are evicted first, then the oldest).
 */
final class DenialCache {

  private static final class Key {

    final String resource;
    final String key;

    Key(String resource, String key) {
      this.resource = resource;
      this.key = key;
    }

    @Override
    public boolean equals(Object o) {
      if (!(o instanceof Key)) {
        return false;
      }
      Key other = (Key) o;
      return resource.equals(other.resource) && Objects.equals(key, other.key);
    }

    @Override
    public int hashCode() {
      return resource.hashCode() * 31 + Objects.hashCode(key);
    }
  }

  private static final class Entry {

    final long permits;
    final long untilNanos;
    final Long limit;
    final Long policyVersion;
    final String policyHeader;

    Entry(long permits, long untilNanos, Long limit, Long policyVersion, String policyHeader) {
      this.permits = permits;
      this.untilNanos = untilNanos;
      this.limit = limit;
      this.policyVersion = policyVersion;
      this.policyHeader = policyHeader;
    }
  }

  private final int capacity;
  private final LongSupplier nanoClock;
  private final LinkedHashMap<Key, Entry> entries = new LinkedHashMap<>();

  DenialCache(int capacity, LongSupplier nanoClock) {
    if (capacity < 0) {
      throw new IllegalArgumentException("capacity must be >= 0");
    }
    this.capacity = capacity;
    this.nanoClock = nanoClock;
  }

  /** Whether the cache is on (capacity above 0). */
  boolean enabled() {
    return capacity > 0;
  }

  /** The denial for (resource, key) and these permits, if a remembered one still covers it. */
  Decision lookup(String resource, String key, long permits) {
    if (capacity == 0) {
      return null;
    }
    long now = nanoClock.getAsLong();
    synchronized (entries) {
      Key k = new Key(resource, key);
      Entry e = entries.get(k);
      if (e == null) {
        return null;
      }
      long left = e.untilNanos - now;
      if (left <= 0) {
        entries.remove(k);
        return null;
      }
      if (permits < e.permits) {
        return null;
      }
      long leftMs = Math.max(1, (left + 999_999) / 1_000_000);
      Map<String, String> headers = new LinkedHashMap<>();
      if (e.policyHeader != null) {
        headers.put("RateLimit-Policy", e.policyHeader);
      }
      headers.put("Retry-After", Long.toString((leftMs + 999) / 1000));
      return new Decision(
        0,
        false,
        0L,
        e.limit,
        leftMs,
        null,
        e.policyVersion,
        null,
        false,
        false,
        true,
        null,
        headers
      );
    }
  }

  /** Remembers a denial, if it is one worth remembering (not degraded, with a retry time). */
  void record(String resource, String key, long permits, Decision d) {
    if (capacity == 0 || d.allowed() || d.degraded() || d.retryAfterMs() <= 0) {
      return;
    }
    long now = nanoClock.getAsLong();
    Entry e = new Entry(
      permits,
      now + d.retryAfterMs() * 1_000_000,
      d.limit().isPresent() ? d.limit().getAsLong() : null,
      d.policyVersion().isPresent() ? d.policyVersion().getAsLong() : null,
      d.headers().get("RateLimit-Policy")
    );
    synchronized (entries) {
      Key k = new Key(resource, key);
      entries.remove(k); // re-inserted as the newest
      if (entries.size() >= capacity) {
        evict(now);
      }
      entries.put(k, e);
    }
  }

  /** Forgets the denial of (resource, key), after a grant, a refund or a release. */
  void forget(String resource, String key) {
    if (capacity == 0) {
      return;
    }
    synchronized (entries) {
      entries.remove(new Key(resource, key));
    }
  }

  /** Entries held (expired ones included until evicted). */
  int size() {
    synchronized (entries) {
      return entries.size();
    }
  }

  /** Whether (resource, key) has an entry (expired or not). */
  boolean contains(String resource, String key) {
    synchronized (entries) {
      return entries.containsKey(new Key(resource, key));
    }
  }

  /** Makes room for one entry: drops every expired entry, then the oldest ones. */
  private void evict(long now) {
    Iterator<Entry> it = entries.values().iterator();
    while (it.hasNext()) {
      if (it.next().untilNanos - now <= 0) {
        it.remove();
      }
    }
    Iterator<Map.Entry<Key, Entry>> oldest = entries.entrySet().iterator();
    while (entries.size() >= capacity && oldest.hasNext()) {
      oldest.next();
      oldest.remove();
    }
  }

  @Override
  public String toString() {
    return "DenialCache{capacity=" + capacity + ", size=" + size() + "}";
  }
}
