export { Client } from "./client.js";
export type {
  AcquireItem,
  AcquireOptions,
  CallOptions,
  ClientOptions,
  KeyOptions,
  Lease,
} from "./client.js";
export type { AcquireAllResult, Decision, RateLimitHeaders, ReleaseResult } from "./decision.js";
export { DenialCache } from "./denial-cache.js";
export {
  BadRequest,
  Conflict,
  Forbidden,
  Invalid,
  NotFound,
  RateLimited,
  RatekeeperError,
  TransportError,
  Unauthorized,
  Unavailable,
  UnexpectedResponse,
} from "./errors.js";
export type { FieldError, ProblemDetails } from "./errors.js";
export { rateLimit } from "./express.js";
export type { Middleware, MiddlewareResponse, RateLimitOptions } from "./express.js";
export { VERSION } from "./version.js";
