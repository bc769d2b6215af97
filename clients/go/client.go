package ratekeeper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Version is this library's version, sent in its User-Agent.
const Version = "0.1.0"

// DefaultTimeout is how long a call waits for the server unless told otherwise.
const DefaultTimeout = time.Second

// The most retries of a call whose connection was refused.
const maxRetries = 2

// The largest reply the client reads.
const maxReply = 1 << 20

// Client calls a ratekeeper server's client API. It is safe for concurrent use; make one
// per server and API key and share it.
type Client struct {
	base      string
	apiKey    string
	http      *http.Client
	timeout   time.Duration
	failOpen  bool
	cache     *denialCache
	userAgent string

	randMu sync.Mutex
	rand   *rand.Rand
}

type config struct {
	timeout   time.Duration
	failOpen  bool
	cacheSize int
	http      *http.Client
}

// Option configures a [Client] (see [New]).
type Option func(*config)

// WithTimeout sets how long a call waits for the server (default 1s), retries included.
// A call that gets no answer in time returns a degraded decision (see [WithFailOpen]).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithFailOpen sets what a degraded decision answers when the server cannot be reached:
// true grants (fail open), false denies (fail closed, the default).
func WithFailOpen(failOpen bool) Option { return func(c *config) { c.failOpen = failOpen } }

// WithDenialCacheSize sets how many recent denials the client remembers to answer
// repeated calls locally (default 10,000); 0 turns the denial cache off.
func WithDenialCacheSize(n int) Option { return func(c *config) { c.cacheSize = n } }

// WithHTTPClient sets the *http.Client the client sends its requests with (default: one
// of its own, on a clone of http.DefaultTransport).
func WithHTTPClient(h *http.Client) Option { return func(c *config) { c.http = h } }

// New returns a client of the server at baseURL (such as "http://127.0.0.1:8080") that
// authenticates with apiKey, an application's API key.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("ratekeeper: invalid server URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ratekeeper: invalid server URL %q: want http(s)://host[:port]", baseURL)
	}
	if apiKey == "" {
		return nil, errors.New("ratekeeper: an API key is required")
	}
	cfg := config{timeout: DefaultTimeout, cacheSize: DefaultDenialCacheSize}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.timeout <= 0 {
		return nil, errors.New("ratekeeper: the timeout must be positive")
	}
	if cfg.cacheSize < 0 {
		return nil, errors.New("ratekeeper: the denial cache size must not be negative")
	}
	if cfg.http == nil {
		cfg.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Client{
		base:      strings.TrimRight(baseURL, "/"),
		apiKey:    apiKey,
		http:      cfg.http,
		timeout:   cfg.timeout,
		failOpen:  cfg.failOpen,
		cache:     newDenialCache(cfg.cacheSize),
		userAgent: "ratekeeper-go/" + Version,
		rand:      rand.New(rand.NewSource(time.Now().UnixNano())),
	}, nil
}

// String describes the client without its API key.
func (c *Client) String() string {
	return fmt.Sprintf("ratekeeper.Client{url: %q, apiKey: [redacted], timeout: %s, failOpen: %t}",
		c.base, c.timeout, c.failOpen)
}

// GoString is String: the API key never appears in %#v either.
func (c *Client) GoString() string { return c.String() }

// CallOption configures one call (see [Permits], [Key], [FailOpen], [Timeout], [Wait]).
type CallOption func(*call)

type call struct {
	permits  int64
	key      string
	failOpen *bool
	timeout  time.Duration
	wait     time.Duration
}

// Permits asks for n permits (default 1).
func Permits(n int64) CallOption { return func(c *call) { c.permits = n } }

// Key names the caller's bucket on a per_key policy (a user, a tenant, an address).
func Key(k string) CallOption { return func(c *call) { c.key = k } }

// FailOpen overrides the client's fail-open setting for this call.
func FailOpen(b bool) CallOption { return func(c *call) { c.failOpen = &b } }

// Timeout overrides the client's timeout for this call.
func Timeout(d time.Duration) CallOption { return func(c *call) { c.timeout = d } }

// Wait lets Acquire wait up to d for the permits: on a denial whose retry time falls
// within what is left of d, it sleeps until then and asks again; a denial that cannot
// be granted within d is returned at once.
func Wait(d time.Duration) CallOption { return func(c *call) { c.wait = d } }

func (c *Client) options(opts []CallOption) call {
	o := call{permits: 1, timeout: c.timeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.timeout <= 0 {
		o.timeout = c.timeout
	}
	return o
}

func (o *call) allowOnFailure(c *Client) bool {
	if o.failOpen != nil {
		return *o.failOpen
	}
	return c.failOpen
}

type acquireBody struct {
	Resource string `json:"resource"`
	Permits  int64  `json:"permits"`
	Key      string `json:"key,omitempty"`
}

// Acquire asks for permits of resource (1 unless [Permits] says otherwise). A grant and
// a denial are both a Decision; the error is a [*Error] when the server refuses the
// request (unknown policy, bad key, invalid permits...). When the server cannot be
// reached in time, Acquire returns a degraded Decision, granted only if failing open,
// and no error. With [Wait], it waits for the permits within that bound. The error is
// the context's when ctx is canceled.
func (c *Client) Acquire(ctx context.Context, resource string, opts ...CallOption) (Decision, error) {
	o := c.options(opts)
	return c.acquire(ctx, resource, o)
}

// Check asks whether one permit of resource would be granted now, taking nothing (an
// acquire of 0 permits). It answers as Acquire does.
func (c *Client) Check(ctx context.Context, resource string, opts ...CallOption) (Decision, error) {
	o := c.options(opts)
	o.permits = 0
	return c.acquire(ctx, resource, o)
}

func (c *Client) acquire(ctx context.Context, resource string, o call) (Decision, error) {
	var end time.Time
	if o.wait > 0 {
		end = time.Now().Add(o.wait)
		if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
			end = dl
		}
	}
	for {
		d, err := c.acquireOnce(ctx, resource, o)
		if err != nil || d.Allowed || d.Degraded || o.wait <= 0 {
			return d, err
		}
		pause := d.RetryAfter
		left := time.Until(end)
		if pause > left {
			return d, nil // the permits cannot come within the bound: no sleep
		}
		pause += c.jitter(pause)
		if pause > left {
			pause = left
		}
		if pause <= 0 {
			pause = time.Millisecond
		}
		if err := sleep(ctx, pause); err != nil {
			return d, err
		}
	}
}

// jitter is a little extra time after a retry time: 1ms plus up to a tenth of it (at
// most 50ms), so that waiters do not all come back at the same instant.
func (c *Client) jitter(d time.Duration) time.Duration {
	spread := d / 10
	if spread > 50*time.Millisecond {
		spread = 50 * time.Millisecond
	}
	return time.Millisecond + time.Duration(c.float()*float64(spread))
}

func (c *Client) float() float64 {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return c.rand.Float64()
}

func (c *Client) acquireOnce(ctx context.Context, resource string, o call) (Decision, error) {
	if d, ok := c.cache.lookup(resource, o.key, o.permits); ok {
		return d, nil
	}
	status, h, body, err := c.post(ctx, "/v1/acquire", acquireBody{resource, o.permits, o.key}, o.timeout)
	if err != nil {
		if ctxErr := canceled(ctx); ctxErr != nil {
			return Decision{}, ctxErr
		}
		var rkErr *Error
		if errors.As(err, &rkErr) && rkErr.Kind == ErrTransport {
			return degraded(o.allowOnFailure(c), err), nil
		}
		return Decision{}, err
	}
	if status != http.StatusOK && status != http.StatusTooManyRequests {
		return Decision{}, problemError(status, body)
	}
	d, err := parseDecision(status, h, body)
	if err != nil {
		return Decision{}, err
	}
	if d.Allowed {
		c.cache.forget(resource, o.key)
	} else {
		c.cache.record(resource, o.key, o.permits, d)
	}
	return d, nil
}

// Item is one acquire of [Client.AcquireAll].
type Item struct {
	Resource string `json:"resource"`
	// Key names the caller's bucket on a per_key policy.
	Key string `json:"key,omitempty"`
	// Permits defaults to 1 when 0; use [CheckPermits] for a check.
	Permits int64 `json:"permits,omitempty"`
}

// CheckPermits as an [Item]'s Permits makes that item a check (0 permits, nothing taken).
const CheckPermits int64 = -1

// AcquireAll acquires every item or none (1 to 16 items, no two on the same resource
// and key): Allowed when each was granted, else nothing was taken. It always asks the
// server (the denial cache does not answer it) and remembers the denials of its items.
// When the server cannot be reached, every result is degraded and Allowed is the
// fail-open setting ([FailOpen] and [Timeout] apply; other options are ignored).
func (c *Client) AcquireAll(ctx context.Context, items []Item, opts ...CallOption) (AllDecision, error) {
	o := c.options(opts)
	wire := make([]Item, len(items))
	for i, it := range items {
		wire[i] = it
		switch {
		case it.Permits == CheckPermits:
			wire[i].Permits = 0
		case it.Permits == 0:
			wire[i].Permits = 1
		}
	}
	// Permits is always sent (a check's 0 included).
	type item struct {
		Resource string `json:"resource"`
		Key      string `json:"key,omitempty"`
		Permits  int64  `json:"permits"`
	}
	body := struct {
		All []item `json:"all"`
	}{All: make([]item, len(wire))}
	for i, it := range wire {
		body.All[i] = item(it)
	}
	status, h, raw, err := c.post(ctx, "/v1/acquire", body, o.timeout)
	if err != nil {
		if ctxErr := canceled(ctx); ctxErr != nil {
			return AllDecision{}, ctxErr
		}
		var rkErr *Error
		if errors.As(err, &rkErr) && rkErr.Kind == ErrTransport {
			allowed := o.allowOnFailure(c)
			all := AllDecision{Allowed: allowed, Results: make([]Decision, len(items))}
			for i := range all.Results {
				all.Results[i] = degraded(allowed, err)
			}
			return all, nil
		}
		return AllDecision{}, err
	}
	if status != http.StatusOK && status != http.StatusTooManyRequests {
		return AllDecision{}, problemError(status, raw)
	}
	all, err := parseAll(status, h, raw)
	if err != nil {
		return AllDecision{}, err
	}
	for i, d := range all.Results {
		if i >= len(wire) {
			break
		}
		if d.Allowed {
			c.cache.forget(wire[i].Resource, wire[i].Key)
		} else {
			c.cache.record(wire[i].Resource, wire[i].Key, wire[i].Permits, d)
		}
	}
	return all, nil
}

// Refund gives back permits of resource that a grant took but the work did not use.
// The Decision says what the bucket holds after it. Unlike Acquire, a server that
// cannot be reached is an error (ErrTransport). [Key] and [Timeout] apply.
func (c *Client) Refund(ctx context.Context, resource string, permits int64, opts ...CallOption) (Decision, error) {
	o := c.options(opts)
	c.cache.forget(resource, o.key)
	status, h, body, err := c.post(ctx, "/v1/refund", acquireBody{resource, permits, o.key}, o.timeout)
	if err != nil {
		return Decision{}, err
	}
	if status != http.StatusOK {
		return Decision{}, problemError(status, body)
	}
	return parseDecision(status, h, body)
}

// Release gives back the lease a grant of a concurrency policy returned
// (Decision.LeaseID). A lease this application does not hold (expired, already
// released) is ErrNotFound; a server that cannot be reached is ErrTransport. [Key] and
// [Timeout] apply.
func (c *Client) Release(ctx context.Context, resource, leaseID string, opts ...CallOption) (Released, error) {
	o := c.options(opts)
	c.cache.forget(resource, o.key)
	body := struct {
		Resource string `json:"resource"`
		LeaseID  string `json:"lease_id"`
		Key      string `json:"key,omitempty"`
	}{resource, leaseID, o.key}
	status, _, raw, err := c.post(ctx, "/v1/release", body, o.timeout)
	if err != nil {
		return Released{}, err
	}
	if status != http.StatusOK {
		return Released{}, problemError(status, raw)
	}
	var r Released
	var wire struct {
		Released  bool  `json:"released"`
		Permits   int64 `json:"permits"`
		Remaining int64 `json:"remaining"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return Released{}, unexpected(status, raw, err)
	}
	r.Released, r.Permits, r.Remaining = wire.Released, wire.Permits, wire.Remaining
	return r, nil
}

// post sends one request, retrying only when the connection was refused (the request
// surely did not reach the server), at most twice, with jittered exponential backoff,
// never past the timeout. Any other failure is an *Error of kind ErrTransport.
func (c *Client) post(ctx context.Context, path string, body any, timeout time.Duration) (int, http.Header, []byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("ratekeeper: encoding the request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	for attempt := 0; ; attempt++ {
		status, h, raw, err := c.send(ctx, path, payload)
		if err == nil {
			return status, h, raw, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || attempt >= maxRetries {
			return 0, nil, nil, transportError(err, timeout)
		}
		backoff := time.Duration(float64(50*time.Millisecond<<attempt) * (0.5 + c.float()))
		if time.Now().Add(backoff).After(deadline) {
			return 0, nil, nil, transportError(err, timeout)
		}
		if err := sleep(ctx, backoff); err != nil {
			return 0, nil, nil, transportError(err, timeout)
		}
	}
}

func (c *Client) send(ctx context.Context, path string, payload []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, raw, nil
}

// canceled is the error of a call whose caller canceled its context (a deadline that
// passes is a timeout, answered as the failure mode says).
func canceled(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return nil
}

// sleep waits d, or until ctx is done (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
