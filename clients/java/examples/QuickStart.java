import dev.ratekeeper.client.Decision;
import dev.ratekeeper.client.RatekeeperClient;

public class QuickStart {

  public static void main(String[] args) {
    String url = System.getenv().getOrDefault("RATEKEEPER_URL", "http://127.0.0.1:8080");
    String apiKey = System.getenv("RATEKEEPER_API_KEY");
    try (RatekeeperClient rk = RatekeeperClient.builder().url(url).apiKey(apiKey).build()) {
      Decision d = rk.acquire("orders.create");
      System.out.println(
        "orders.create: allowed=" +
        d.allowed() +
        " remaining=" +
        (d.remaining().isPresent() ? d.remaining().getAsLong() : "?") +
        " retry_after_ms=" +
        d.retryAfterMs() +
        (d.degraded() ? " (degraded: no reply from ratekeeper)" : "")
      );
    }
  }
}
