/** This library's version, sent in the `User-Agent` header. */
export const VERSION = "0.1.0";
