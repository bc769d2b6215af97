import dev.ratekeeper.client.Lease;
import dev.ratekeeper.client.RateLimitedException;
import dev.ratekeeper.client.RatekeeperClient;

/** At most N exports at once, under a concurrency policy "reports.export". */
public class Leases {

  public static void main(String[] args) throws InterruptedException {
    String url = System.getenv().getOrDefault("RATEKEEPER_URL", "http://127.0.0.1:8080");
    try (
      RatekeeperClient rk = RatekeeperClient.builder()
        .url(url)
        .apiKey(System.getenv("RATEKEEPER_API_KEY"))
        .build()
    ) {
      try (Lease lease = rk.lease("reports.export")) {
        System.out.println("exporting under lease " + lease.leaseId().orElse("(degraded)"));
        Thread.sleep(100);
      } catch (RateLimitedException e) {
        System.out.println("busy: retry in " + e.decision().retryAfterMs() + " ms");
      }
    }
  }
}
