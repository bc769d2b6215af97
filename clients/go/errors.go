package ratekeeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The kinds of [*Error], one per problem type of the server, for use with errors.Is:
//
//	if errors.Is(err, ratekeeper.ErrNotFound) { ... }
var (
	// ErrBadRequest: 400, the request did not fit the API (urn:ratekeeper:problem:malformed).
	ErrBadRequest = errors.New("ratekeeper: bad request")
	// ErrUnauthorized: 401, no API key, or an unknown, revoked or expired one.
	ErrUnauthorized = errors.New("ratekeeper: unauthorized")
	// ErrForbidden: 403, the key's application may not use the resource.
	ErrForbidden = errors.New("ratekeeper: forbidden")
	// ErrNotFound: 404, no such policy, or (release) no such lease held (lease-not-held).
	ErrNotFound = errors.New("ratekeeper: not found")
	// ErrConflict: 409, such as a release on a policy that hands out no leases
	// (not-a-lease-policy).
	ErrConflict = errors.New("ratekeeper: conflict")
	// ErrInvalid: 422, an invalid field (urn:ratekeeper:problem:validation); see
	// [Error.Errors].
	ErrInvalid = errors.New("ratekeeper: invalid input")
	// ErrUnavailable: 503, the server cannot reach its Redis and the policy fails closed.
	ErrUnavailable = errors.New("ratekeeper: unavailable")
	// ErrTransport: the server could not be reached or did not answer in time. Acquire
	// and Check never return it (they answer a degraded [Decision] instead); Refund and
	// Release do, having no decision to report.
	ErrTransport = errors.New("ratekeeper: transport error")
	// ErrUnexpected: any other answer, such as a 500 or a reply that is not the API's.
	ErrUnexpected = errors.New("ratekeeper: unexpected response")
	// ErrDenied: a [Lease] was not granted; the error is a [*DeniedError].
	ErrDenied = errors.New("ratekeeper: not granted")
)

// FieldError names one invalid field of a request, as the server reports it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is every error the client returns for a request the server refused (from its
// application/problem+json reply) or that did not reach it. Kind is one of the Err*
// sentinels, so errors.Is(err, ErrNotFound) works; errors.As gives the details:
//
//	var rkErr *ratekeeper.Error
//	if errors.As(err, &rkErr) { log.Print(rkErr.Status, rkErr.Detail) }
type Error struct {
	// Kind is the sentinel this error matches with errors.Is (ErrNotFound, ...).
	Kind error
	// Status is the HTTP status, 0 for a transport error.
	Status int
	// Type is the problem type URI, such as "urn:ratekeeper:problem:not-found".
	Type string
	// Title is the problem's short summary, Detail what happened in this case.
	Title  string
	Detail string
	// Field is the first invalid field, when the server names one.
	Field string
	// Errors lists every invalid field, when the server names them.
	Errors []FieldError
	// Err is the cause of a transport error (a *url.Error, context.DeadlineExceeded...).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
	} else {
		b.WriteString("ratekeeper: error")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (%d)", e.Status)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	} else if e.Title != "" {
		b.WriteString(": ")
		b.WriteString(e.Title)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is reports whether target is this error's Kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause of a transport error, if any.
func (e *Error) Unwrap() error { return e.Err }

// DeniedError is what [Client.Lease] returns when the permit is not granted; Decision
// says why and when to come back (Decision.RetryAfter). errors.Is(err, ErrDenied) holds.
type DeniedError struct {
	Decision Decision
}

func (e *DeniedError) Error() string {
	if e.Decision.Degraded {
		return "ratekeeper: not granted: the server could not be reached (fail closed)"
	}
	return fmt.Sprintf("ratekeeper: not granted, retry after %s", e.Decision.RetryAfter)
}

// Is reports whether target is ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

const problemPrefix = "urn:ratekeeper:problem:"

// kindOf maps a problem type (else the status) to its sentinel.
func kindOf(problemType string, status int) error {
	switch strings.TrimPrefix(problemType, problemPrefix) {
	case "malformed":
		return ErrBadRequest
	case "unauthorized":
		return ErrUnauthorized
	case "forbidden":
		return ErrForbidden
	case "not-found", "lease-not-held":
		return ErrNotFound
	case "conflict", "not-a-lease-policy":
		return ErrConflict
	case "validation":
		return ErrInvalid
	case "unavailable":
		return ErrUnavailable
	}
	switch status {
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	case http.StatusUnprocessableEntity:
		return ErrInvalid
	case http.StatusServiceUnavailable:
		return ErrUnavailable
	}
	return ErrUnexpected
}

// problemError builds the error of a reply that is not a decision.
func problemError(status int, body []byte) *Error {
	var p struct {
		Type   string       `json:"type"`
		Title  string       `json:"title"`
		Detail string       `json:"detail"`
		Field  string       `json:"field"`
		Errors []FieldError `json:"errors"`
	}
	e := &Error{Status: status}
	if json.Unmarshal(body, &p) == nil && p.Type != "" {
		e.Type, e.Title, e.Detail, e.Field, e.Errors = p.Type, p.Title, p.Detail, p.Field, p.Errors
		if e.Field == "" && len(e.Errors) > 0 {
			e.Field = e.Errors[0].Field
		}
	} else {
		e.Title = http.StatusText(status)
		e.Detail = snippet(body)
	}
	e.Kind = kindOf(e.Type, status)
	return e
}

// unexpected is the error of a reply with a decision's status the client cannot read.
func unexpected(status int, body []byte, cause error) *Error {
	return &Error{
		Kind:   ErrUnexpected,
		Status: status,
		Title:  http.StatusText(status),
		Detail: "the reply is not the API's: " + snippet(body),
		Err:    cause,
	}
}

func transportError(cause error, timeout time.Duration) *Error {
	return &Error{
		Kind:   ErrTransport,
		Detail: fmt.Sprintf("no answer from the server (timeout %s)", timeout),
		Err:    cause,
	}
}

func snippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
