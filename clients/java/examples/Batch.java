import dev.ratekeeper.client.AcquireOptions;
import dev.ratekeeper.client.AllDecision;
import dev.ratekeeper.client.Decision;
import dev.ratekeeper.client.InvalidException;
import dev.ratekeeper.client.Item;
import dev.ratekeeper.client.RatekeeperClient;
import dev.ratekeeper.client.RatekeeperException;
import java.time.Duration;
import java.util.List;

/**
 * Several limits at once, a check, a refund, and a bounded wait, for a user "u42" under two
 * per_key policies "api.burst" and "api.daily" (make them first; see the README).
 */
public class Batch {

  public static void main(String[] args) {
    String url = System.getenv().getOrDefault("RATEKEEPER_URL", "http://127.0.0.1:8080");
    try (
      RatekeeperClient rk = RatekeeperClient.builder()
        .url(url)
        .apiKey(System.getenv("RATEKEEPER_API_KEY"))
        .timeout(Duration.ofMillis(500))
        .failOpen(true)
        .build()
    ) {
      // All or nothing: a denial of one takes nothing from the other.
      AllDecision all = rk.acquireAll(
        List.of(Item.of("api.burst", "u42"), Item.of("api.daily", "u42", 2))
      );
      System.out.println("both: " + all.allowed() + " " + all.results());

      // Would one more be granted? (takes nothing)
      Decision check = rk.check("api.burst", "u42");
      System.out.println("check: " + check.allowed() + ", remaining " + check.remaining());

      // Took 10 tokens, used 3: give 7 back.
      try {
        Decision refund = rk.refund("api.daily", 7, "u42");
        System.out.println("after refund: " + refund.remaining());
      } catch (InvalidException e) {
        System.out.println("refund refused: " + e.field() + ": " + e.detail());
      }

      // Wait up to 2 s for a permit, sleeping for the server's retry time (never spinning).
      Decision waited = rk.acquire(
        "api.burst",
        AcquireOptions.builder().key("u42").waitFor(Duration.ofSeconds(2)).build()
      );
      System.out.println("after waiting: " + waited.allowed());
    } catch (RatekeeperException e) {
      System.out.println(e.getClass().getSimpleName() + " " + e.status() + ": " + e.detail());
    }
  }
}
