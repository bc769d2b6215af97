package dev.ratekeeper.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Turns an error reply (problem+json) into the {@link RatekeeperException} for its status. */
final class Errors {

  private Errors() {}

  static RatekeeperException fromProblem(int status, Map<String, Object> problem, String body) {
    String type = Json.stringField(problem, "type");
    String title = Json.stringField(problem, "title");
    String detail = Json.stringField(problem, "detail");
    if (type == null && title == null && detail == null && body != null && !body.isEmpty()) {
      detail = body.length() > 200 ? body.substring(0, 200) + "..." : body;
    }
    List<FieldError> errors = new ArrayList<>();
    for (Map<String, Object> e : Json.objectsField(problem, "errors")) {
      String field = Json.stringField(e, "field");
      if (field != null) {
        errors.add(new FieldError(field, Json.stringField(e, "message")));
      }
    }
    String field = Json.stringField(problem, "field");
    if (errors.isEmpty() && field != null) {
      errors.add(new FieldError(field, detail));
    }
    switch (status) {
      case 400:
        return new BadRequestException(status, type, title, detail, errors);
      case 401:
        return new UnauthorizedException(status, type, title, detail, errors);
      case 403:
        return new ForbiddenException(status, type, title, detail, errors);
      case 404:
        return new NotFoundException(status, type, title, detail, errors);
      case 409:
        return new ConflictException(status, type, title, detail, errors);
      case 422:
        return new InvalidException(status, type, title, detail, errors);
      case 503:
        return new UnavailableException(status, type, title, detail, errors);
      default:
        return new RatekeeperException(
          status,
          type,
          title == null ? "Unexpected response" : title,
          detail,
          errors,
          null
        );
    }
  }
}
