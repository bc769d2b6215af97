package dev.ratekeeper.client.testkit;

/** A test made at run time: a name and a body. */
public final class DynamicTest {

  /** A test body that may throw. */
  public interface Body {
    void run() throws Exception;
  }

  final String name;
  final Body body;

  public DynamicTest(String name, Body body) {
    this.name = name;
    this.body = body;
  }
}
