// COMPILE-TIME STAND-IN, NOT SHIPPED: a minimal copy of the Jakarta Servlet API type of the
// same name, with only the members the rate-limit filter uses, so that the filter compiles and
// is tested without downloading the API. Applications compile and run the filter against the
// real jakarta.servlet-api (5.0 or later), with the same signatures.
package jakarta.servlet;

import java.io.IOException;
import java.io.PrintWriter;

public interface ServletResponse {
  void setContentType(String type);

  void setCharacterEncoding(String charset);

  PrintWriter getWriter() throws IOException;

  boolean isCommitted();
}
