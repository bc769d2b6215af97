package ratekeeper

import (
	"encoding/json"
	"net/http"
	"time"
)

// Decision is the server's answer to an acquire (or a check, or a refund): granted or
// not, with what the bucket holds. A denial is a Decision with Allowed false, not an
// error.
type Decision struct {
	// Allowed says whether the permits were granted.
	Allowed bool
	// Remaining is what the bucket holds after this decision; -1 when not known (a
	// degraded decision).
	Remaining int64
	// Limit is the policy's (or the caller's override's) max_permits; -1 when not known.
	Limit int64
	// RetryAfter says when the permits asked for will be there (0 when granted).
	RetryAfter time.Duration
	// ResetAfter says when the bucket will be full again.
	ResetAfter time.Duration
	// PolicyVersion is the version of the policy that decided; 0 when not known.
	PolicyVersion int64
	// Enforced is false when the policy is disabled (granted without counting).
	Enforced bool
	// Degraded is true when the decision was made without the limit: the server could
	// not reach its Redis and the policy fails open, or the client could not reach the
	// server (then Allowed is the fail-open setting and Cause says why).
	Degraded bool
	// ShadowDenied is true when the policy is in shadow mode and would have denied.
	ShadowDenied bool
	// Cached is true when the client answered a denial from its denial cache, without
	// a request.
	Cached bool
	// LeaseID is set on a grant of a concurrency policy: give it back with
	// [Client.Release] (or use [Client.Lease]).
	LeaseID string
	// Header holds the reply's RateLimit, RateLimit-Policy and Retry-After headers, as
	// sent (nil when there were none).
	Header http.Header
	// Cause is the transport failure behind a degraded decision the client made itself.
	Cause error

	// present records which numbers the server sent (the others are defaults).
	present fields
}

// RetryAfterMs is RetryAfter in milliseconds, as the server sends it.
func (d Decision) RetryAfterMs() int64 { return d.RetryAfter.Milliseconds() }

// ResetAfterMs is ResetAfter in milliseconds, as the server sends it.
func (d Decision) ResetAfterMs() int64 { return d.ResetAfter.Milliseconds() }

type fields uint8

const (
	hasRemaining fields = 1 << iota
	hasLimit
	hasRetryAfter
	hasResetAfter
	hasPolicyVersion
)

// AllDecision is the answer to [Client.AcquireAll]: Allowed when every item was granted
// (else nothing was taken), and one Decision per item, in order.
type AllDecision struct {
	Allowed bool
	Results []Decision
	// Header holds the RateLimit headers of the most restrictive item, as sent.
	Header http.Header
}

// Released is the answer to [Client.Release].
type Released struct {
	Released bool
	// Permits is how many permits the lease held.
	Permits int64
	// Remaining is how many permits the policy has free after the release.
	Remaining int64
}

// reply is the JSON of one acquire's answer.
type reply struct {
	Allowed       bool    `json:"allowed"`
	Remaining     *int64  `json:"remaining"`
	Limit         *int64  `json:"limit"`
	RetryAfterMs  *int64  `json:"retry_after_ms"`
	ResetAfterMs  *int64  `json:"reset_after_ms"`
	PolicyVersion *int64  `json:"policy_version"`
	Enforced      *bool   `json:"enforced"`
	Degraded      *bool   `json:"degraded"`
	ShadowDenied  *bool   `json:"shadow_denied"`
	LeaseID       *string `json:"lease_id"`
}

func (r *reply) decision(h http.Header) Decision {
	d := Decision{
		Allowed:   r.Allowed,
		Remaining: -1,
		Limit:     -1,
		Enforced:  r.Enforced == nil || *r.Enforced,
		Degraded:  r.Degraded != nil && *r.Degraded,
		Header:    h,
	}
	if r.Remaining != nil {
		d.Remaining = *r.Remaining
		d.present |= hasRemaining
	}
	if r.Limit != nil {
		d.Limit = *r.Limit
		d.present |= hasLimit
	}
	if r.RetryAfterMs != nil {
		d.RetryAfter = time.Duration(*r.RetryAfterMs) * time.Millisecond
		d.present |= hasRetryAfter
	}
	if r.ResetAfterMs != nil {
		d.ResetAfter = time.Duration(*r.ResetAfterMs) * time.Millisecond
		d.present |= hasResetAfter
	}
	if r.PolicyVersion != nil {
		d.PolicyVersion = *r.PolicyVersion
		d.present |= hasPolicyVersion
	}
	if r.ShadowDenied != nil {
		d.ShadowDenied = *r.ShadowDenied
	}
	if r.LeaseID != nil {
		d.LeaseID = *r.LeaseID
	}
	return d
}

// The headers a Decision keeps.
var rateLimitHeaders = []string{"RateLimit", "RateLimit-Policy", "Retry-After"}

func pickHeaders(h http.Header) http.Header {
	var out http.Header
	for _, name := range rateLimitHeaders {
		if v := h.Values(name); len(v) > 0 {
			if out == nil {
				out = http.Header{}
			}
			out[http.CanonicalHeaderKey(name)] = append([]string(nil), v...)
		}
	}
	return out
}

// parseDecision reads a 200 or 429 acquire reply.
func parseDecision(status int, h http.Header, body []byte) (Decision, error) {
	var r reply
	if err := json.Unmarshal(body, &r); err != nil {
		return Decision{}, unexpected(status, body, err)
	}
	return r.decision(pickHeaders(h)), nil
}

// parseAll reads a 200 or 429 reply of an acquire with "all".
func parseAll(status int, h http.Header, body []byte) (AllDecision, error) {
	var r struct {
		Allowed bool    `json:"allowed"`
		Results []reply `json:"results"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return AllDecision{}, unexpected(status, body, err)
	}
	all := AllDecision{Allowed: r.Allowed, Header: pickHeaders(h)}
	all.Results = make([]Decision, len(r.Results))
	for i := range r.Results {
		all.Results[i] = r.Results[i].decision(nil)
	}
	return all, nil
}

// degraded is the decision of a call that did not get an answer.
func degraded(allowed bool, cause error) Decision {
	return Decision{
		Allowed:   allowed,
		Remaining: -1,
		Limit:     -1,
		Enforced:  true,
		Degraded:  true,
		Cause:     cause,
	}
}
