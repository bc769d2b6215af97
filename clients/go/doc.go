// Package ratekeeper is the Go client of ratekeeper, a multi-tenant rate-limit server.
//
// A [Client] acquires permits of the server's policies with an application's API key:
//
//	client, err := ratekeeper.New("http://127.0.0.1:8080", apiKey)
//	if err != nil { ... }
//	d, err := client.Acquire(ctx, "orders.create")
//	if err != nil { ... }            // a request the server refused: *Error
//	if !d.Allowed { ... }            // denied: come back after d.RetryAfter
//
// A grant and a denial are both a [Decision]; errors are for requests the server
// refuses ([*Error], matched with errors.Is against ErrNotFound, ErrInvalid, ...). When
// the server cannot be reached within the timeout, Acquire does not fail: it returns a
// Decision with Degraded set, granted only if the client (or the call) fails open.
//
// The client remembers recent denials and answers a caller that asks again before its
// retry time without a request (the denial cache). [Wait] lets a call wait for its
// permits within a bound, sleeping by the server's retry time. [Client.Lease] holds a
// permit of a concurrency policy for the length of a function, and [Middleware] limits
// an http.Handler.
//
// Every method takes a context and a Client is safe for concurrent use.
package ratekeeper
