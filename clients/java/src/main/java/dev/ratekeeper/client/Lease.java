package dev.ratekeeper.client;

import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Permits of a concurrency policy held for the scope of a try-with-resources block: {@link
 * #close()} releases them (once; later calls do nothing). A grant made degraded (no reply, fail
 * open) holds no lease on the server, and closing it sends nothing.
 */
public final class Lease implements AutoCloseable {

  private final RatekeeperClient client;
  private final String resource;
  private final AcquireOptions options;
  private final Decision decision;
  private final AtomicBoolean closed = new AtomicBoolean();

  Lease(RatekeeperClient client, String resource, AcquireOptions options, Decision decision) {
    this.client = client;
    this.resource = resource;
    this.options = options;
    this.decision = decision;
  }

  /** The grant that took the permits. */
  public Decision decision() {
    return decision;
  }

  /** The resource the permits are of. */
  public String resource() {
    return resource;
  }

  /** The lease id, empty for a degraded grant. */
  public Optional<String> leaseId() {
    return decision.leaseId();
  }

  /** Whether {@link #close()} was called. */
  public boolean closed() {
    return closed.get();
  }

  /**
   * Releases the permits (the first call only).
   *
   * @throws RatekeeperException when the release fails: {@link NotFoundException} when the lease
   *     was no longer held (it expired), {@link TransportException} when no reply came (the lease
   *     then expires after the policy's {@code lease_ttl_ms})
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    Optional<String> id = decision.leaseId();
    if (id.isPresent()) {
      client.release(resource, id.get(), options);
    }
  }

  @Override
  public String toString() {
    return "Lease{" + resource + ", " + decision.leaseId().orElse("degraded") + "}";
  }
}
