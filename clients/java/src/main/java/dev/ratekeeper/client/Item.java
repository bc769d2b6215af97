package dev.ratekeeper.client;

import java.util.Objects;

/** One item of {@link RatekeeperClient#acquireAll}: a resource, an optional key, and permits. */
public final class Item {

  private final String resource;
  private final String key;
  private final long permits;

  private Item(String resource, String key, long permits) {
    this.resource = Objects.requireNonNull(resource, "resource");
    this.key = key;
    this.permits = permits;
  }

  /** One permit of a resource (a global policy). */
  public static Item of(String resource) {
    return new Item(resource, null, 1);
  }

  /** One permit of a resource for a key (a {@code per_key} policy); key may be null. */
  public static Item of(String resource, String key) {
    return new Item(resource, key, 1);
  }

  /** Some permits of a resource for a key (null for none); 0 permits is a check. */
  public static Item of(String resource, String key, long permits) {
    return new Item(resource, key, permits);
  }

  /** The resource (the policy's name). */
  public String resource() {
    return resource;
  }

  /** The key, or null. */
  public String key() {
    return key;
  }

  /** The permits asked for. */
  public long permits() {
    return permits;
  }

  @Override
  public String toString() {
    return "Item{" + resource + (key == null ? "" : ", key=" + key) + ", permits=" + permits + "}";
  }
}
