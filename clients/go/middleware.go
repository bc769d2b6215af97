package ratekeeper

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Middleware limits an http.Handler by resource: each request acquires one permit (of
// the caller's bucket keyFunc names, when keyFunc is not nil and returns a key). A
// denied request is answered 429 Too Many Requests with Retry-After and the RateLimit
// headers; a granted one goes on to the handler with the RateLimit headers set on its
// response. When the limiter cannot be reached, the client's fail-open setting decides:
// open lets the request through, closed answers 503. A request the server refuses
// (unknown policy, bad API key...) is answered 500 (503 for ErrUnavailable).
//
//	mux.Handle("/orders", ratekeeper.Middleware(client, "orders.create", byUser)(orders))
func Middleware(client *Client, resource string, keyFunc func(*http.Request) string) func(http.Handler) http.Handler {
	return MiddlewareFunc(client, func(*http.Request) string { return resource }, keyFunc)
}

// MiddlewareFunc is [Middleware] with the resource taken from each request.
func MiddlewareFunc(client *Client, resourceFunc, keyFunc func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var opts []CallOption
			if keyFunc != nil {
				if key := keyFunc(r); key != "" {
					opts = append(opts, Key(key))
				}
			}
			d, err := client.Acquire(r.Context(), resourceFunc(r), opts...)
			if err != nil {
				status := http.StatusInternalServerError
				if errors.Is(err, ErrUnavailable) {
					status = http.StatusServiceUnavailable
				}
				http.Error(w, http.StatusText(status), status)
				return
			}
			for _, name := range []string{"RateLimit", "RateLimit-Policy"} {
				if v := d.Header.Values(name); len(v) > 0 {
					w.Header()[http.CanonicalHeaderKey(name)] = append([]string(nil), v...)
				}
			}
			switch {
			case d.Allowed:
				next.ServeHTTP(w, r)
			case d.Degraded:
				http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
			default:
				w.Header().Set("Retry-After", retryAfterSeconds(d))
				http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
			}
		})
	}
}

// retryAfterSeconds is the Retry-After of a denial: the server's, else its retry time in
// whole seconds, rounded up, at least 1.
func retryAfterSeconds(d Decision) string {
	if v := d.Header.Get("Retry-After"); v != "" {
		return v
	}
	secs := int64((d.RetryAfter + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return strconv.FormatInt(secs, 10)
}
