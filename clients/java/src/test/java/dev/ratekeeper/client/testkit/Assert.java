package dev.ratekeeper.client.testkit;

import java.util.Objects;

/** Assertions: each throws {@link AssertionError} with what was expected and what came. */
public final class Assert {

  private Assert() {}

  public static void assertTrue(boolean condition, String what) {
    if (!condition) {
      throw new AssertionError(what);
    }
  }

  public static void assertFalse(boolean condition, String what) {
    assertTrue(!condition, what);
  }

  public static void assertEquals(Object expected, Object actual, String what) {
    if (!Objects.equals(expected, actual)) {
      throw new AssertionError(what + ": expected <" + expected + "> but was <" + actual + ">");
    }
  }

  public static void assertNull(Object actual, String what) {
    assertEquals(null, actual, what);
  }

  public static void fail(String what) {
    throw new AssertionError(what);
  }

  /** A body that throws. */
  public interface Body {
    void run() throws Exception;
  }

  /** Runs the body and returns what it threw, which must be of the given class. */
  public static <T extends Throwable> T assertThrows(Class<T> type, Body body, String what) {
    try {
      body.run();
    } catch (Throwable t) {
      if (type.isInstance(t)) {
        return type.cast(t);
      }
      throw new AssertionError(what + ": expected " + type.getSimpleName() + " but got " + t, t);
    }
    throw new AssertionError(what + ": expected " + type.getSimpleName() + ", nothing thrown");
  }
}
