package dev.ratekeeper.client;

import static dev.ratekeeper.client.testkit.Assert.assertEquals;
import static dev.ratekeeper.client.testkit.Assert.assertFalse;
import static dev.ratekeeper.client.testkit.Assert.assertNull;
import static dev.ratekeeper.client.testkit.Assert.assertTrue;

import dev.ratekeeper.client.testkit.Test;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

public final class DenialCacheTest {

  private final FakeClock clock = new FakeClock();

  private static Decision denial(long retryAfterMs) {
    return new Decision(
      429,
      false,
      0L,
      5L,
      retryAfterMs,
      9000L,
      3L,
      null,
      false,
      false,
      false,
      null,
      Map.of("RateLimit-Policy", "\"p\";q=5", "RateLimit", "\"p\";r=0;t=2", "Retry-After", "2")
    );
  }

  @Test
  public void answersCoveredCallsUntilTheRetryTime() {
    DenialCache cache = new DenialCache(10, clock::nanoTime);
    cache.record("p", "k", 2, denial(1500));
    Decision d = cache.lookup("p", "k", 2);
    assertTrue(d != null, "same permits answered");
    assertFalse(d.allowed(), "denied");
    assertTrue(d.cached(), "cached");
    assertFalse(d.degraded(), "not degraded");
    assertEquals(0L, d.remaining().getAsLong(), "remaining 0");
    assertEquals(5L, d.limit().getAsLong(), "same limit");
    assertEquals(1500L, d.retryAfterMs(), "retry after");
    assertEquals("\"p\";q=5", d.headers().get("ratelimit-policy"), "policy header kept");
    assertEquals("2", d.headers().get("Retry-After"), "Retry-After in whole seconds");
    assertTrue(cache.lookup("p", "k", 3) != null, "more permits answered");
    assertNull(cache.lookup("p", "k", 1), "fewer permits not answered");
    assertNull(cache.lookup("p", "other", 2), "other key not answered");
    assertNull(cache.lookup("p", null, 2), "no key not answered");
    assertNull(cache.lookup("q", "k", 2), "other resource not answered");

    clock.advanceMs(1000);
    assertEquals(500L, cache.lookup("p", "k", 2).retryAfterMs(), "remaining retry time");
    clock.advanceMs(500);
    assertNull(cache.lookup("p", "k", 2), "expired");
    assertFalse(cache.contains("p", "k"), "expired entry dropped");
  }

  @Test
  public void remembersOnlyRealDenials() {
    DenialCache cache = new DenialCache(10, clock::nanoTime);
    cache.record("p", null, 1, Decision.degraded(false));
    cache.record("p", null, 1, denial(0));
    Decision granted = new Decision(
      200,
      true,
      1L,
      5L,
      0L,
      0L,
      1L,
      null,
      false,
      false,
      false,
      null,
      Map.of()
    );
    cache.record("p", null, 1, granted);
    assertEquals(0, cache.size(), "nothing remembered");
  }

  @Test
  public void forgetDropsTheEntry() {
    DenialCache cache = new DenialCache(10, clock::nanoTime);
    cache.record("p", "k", 1, denial(1000));
    cache.record("p", "j", 1, denial(1000));
    cache.forget("p", "k");
    assertNull(cache.lookup("p", "k", 1), "forgotten");
    assertTrue(cache.lookup("p", "j", 1) != null, "other key kept");
  }

  @Test
  public void checkDenialCoversEverything() {
    DenialCache cache = new DenialCache(10, clock::nanoTime);
    cache.record("p", null, 0, denial(1000));
    assertTrue(cache.lookup("p", null, 0) != null, "check answered");
    assertTrue(cache.lookup("p", null, 1) != null, "acquire answered");
  }

  @Test
  public void boundedEvictingExpiredFirstThenOldest() {
    DenialCache cache = new DenialCache(3, clock::nanoTime);
    cache.record("a", null, 1, denial(10_000));
    cache.record("b", null, 1, denial(100));
    cache.record("c", null, 1, denial(10_000));
    clock.advanceMs(200); // b expired
    cache.record("d", null, 1, denial(10_000));
    assertEquals(3, cache.size(), "bounded");
    assertFalse(cache.contains("b", null), "expired entry evicted first");
    assertTrue(cache.contains("a", null), "oldest live entry kept while an expired one goes");
    cache.record("e", null, 1, denial(10_000));
    assertEquals(3, cache.size(), "still bounded");
    assertFalse(cache.contains("a", null), "then the oldest evicted");
    assertTrue(
      cache.contains("c", null) && cache.contains("d", null) && cache.contains("e", null),
      "newer kept"
    );
    cache.record("c", null, 1, denial(10_000)); // refreshed: now the newest
    cache.record("f", null, 1, denial(10_000));
    assertFalse(cache.contains("d", null), "the oldest is d after c was refreshed");
    assertTrue(cache.contains("c", null), "refreshed entry kept");
  }

  @Test
  public void sizeZeroTurnsItOff() {
    DenialCache cache = new DenialCache(0, clock::nanoTime);
    cache.record("p", null, 1, denial(1000));
    assertNull(cache.lookup("p", null, 1), "off");
    assertEquals(0, cache.size(), "empty");
    assertFalse(cache.enabled(), "disabled");
  }

  @Test
  public void threadSafeAndBoundedUnderContention() throws Exception {
    DenialCache cache = new DenialCache(50, System::nanoTime);
    AtomicReference<Throwable> error = new AtomicReference<>();
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < 8; t++) {
      int id = t;
      Thread thread = new Thread(() -> {
        try {
          for (int i = 0; i < 5000; i++) {
            String r = "r" + ((i * 7 + id) % 200);
            cache.record(r, null, 1, denial(60_000));
            Decision d = cache.lookup(r, null, 1);
            if (d != null && (d.allowed() || !d.cached())) {
              throw new AssertionError("bad cached decision " + d);
            }
            if (i % 3 == 0) {
              cache.forget(r, null);
            }
            if (cache.size() > 50) {
              throw new AssertionError("over capacity: " + cache.size());
            }
          }
        } catch (Throwable e) {
          error.compareAndSet(null, e);
        }
      });
      threads.add(thread);
      thread.start();
    }
    for (Thread thread : threads) {
      thread.join(60_000);
    }
    if (error.get() != null) {
      throw new AssertionError("a thread failed: " + error.get(), error.get());
    }
    assertTrue(cache.size() <= 50, "bounded after contention");
  }
}
