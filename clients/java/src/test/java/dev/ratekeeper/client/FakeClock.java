package dev.ratekeeper.client;

import java.util.ArrayList;
import java.util.List;

/** A clock that moves only when slept on, recording the sleeps (so tests never wait). */
final class FakeClock implements RatekeeperClient.Sleeper {

  private long nanos = 1_000_000_000L;
  final List<Long> sleeps = new ArrayList<>();

  synchronized long nanoTime() {
    return nanos;
  }

  synchronized void advanceMs(long ms) {
    nanos += ms * 1_000_000;
  }

  @Override
  public synchronized void sleep(long millis) {
    if (millis <= 0) {
      throw new AssertionError("asked to sleep " + millis + " ms (a spin)");
    }
    sleeps.add(millis);
    nanos += millis * 1_000_000;
  }

  synchronized List<Long> sleeps() {
    return new ArrayList<>(sleeps);
  }
}
