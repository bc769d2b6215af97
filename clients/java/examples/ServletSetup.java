import dev.ratekeeper.client.RatekeeperClient;
import dev.ratekeeper.client.servlet.RateLimitFilter;
import jakarta.servlet.Filter;

/**
 * Making the servlet filter in code; register it with your container, e.g. {@code
 * servletContext.addFilter("ratelimit", filter).addMappingForUrlPatterns(null, false, "/api/*")}
 * or Spring Boot's {@code FilterRegistrationBean}. Needs jakarta.servlet-api on the class path.
 */
public class ServletSetup {

  public static Filter filter(RatekeeperClient client) {
    // One permit of "api.requests" per request, per caller (the X-User header).
    return new RateLimitFilter(client, "api.requests", request -> request.getHeader("X-User"));
  }

  public static void main(String[] args) {
    String url = System.getenv().getOrDefault("RATEKEEPER_URL", "http://127.0.0.1:8080");
    try (
      RatekeeperClient rk = RatekeeperClient.builder()
        .url(url)
        .apiKey(System.getenv("RATEKEEPER_API_KEY"))
        .build()
    ) {
      System.out.println("made " + filter(rk).getClass().getSimpleName());
    }
  }
}
