// COMPILE-TIME STAND-IN, NOT SHIPPED: a minimal copy of the Jakarta Servlet API type of the
// same name, with only the members the rate-limit filter uses, so that the filter compiles and
// is tested without downloading the API. Applications compile and run the filter against the
// real jakarta.servlet-api (5.0 or later), with the same signatures.
package jakarta.servlet;

import java.io.IOException;

public interface Filter {
  default void init(FilterConfig filterConfig) throws ServletException {}

  void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
    throws IOException, ServletException;

  default void destroy() {}
}
