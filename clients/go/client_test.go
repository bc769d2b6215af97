package ratekeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const testKey = "rk_live_secretsecretsecret"

// silentListener accepts connections and never answers: every request times out.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// refusedURL is a loopback address where nothing listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func newClient(t *testing.T, url string, opts ...Option) *Client {
	t.Helper()
	c, err := New(url, testKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeServer answers each request with the next of its replies (the last one repeats)
// and records the requests.
type fakeServer struct {
	mu       sync.Mutex
	replies  []fakeReply
	requests []recorded
	*httptest.Server
}

type fakeReply struct {
	status int
	body   string
	header map[string]string
}

type recorded struct {
	path   string
	body   map[string]any
	header http.Header
}

func newFakeServer(t *testing.T, replies ...fakeReply) *fakeServer {
	t.Helper()
	f := &fakeServer{replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.requests = append(f.requests, recorded{r.URL.Path, body, r.Header.Clone()})
		reply := f.replies[0]
		if len(f.replies) > 1 {
			f.replies = f.replies[1:]
		}
		f.mu.Unlock()
		for k, v := range reply.header {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(reply.status)
		io.WriteString(w, reply.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeServer) request(i int) recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[i]
}

func grant(remaining int) fakeReply {
	return fakeReply{200, fmt.Sprintf(`{"allowed":true,"remaining":%d,"limit":5,"retry_after_ms":0,"reset_after_ms":1000,"policy_version":1}`, remaining),
		map[string]string{"RateLimit": `"p";r=1;t=1`, "RateLimit-Policy": `"p";q=5`}}
}

func deny(retryMs int) fakeReply {
	return fakeReply{429, fmt.Sprintf(`{"allowed":false,"remaining":0,"limit":5,"retry_after_ms":%d,"reset_after_ms":5000,"policy_version":1}`, retryMs),
		map[string]string{"RateLimit": `"p";r=0;t=1`, "RateLimit-Policy": `"p";q=5`, "Retry-After": "1"}}
}

func problem(status int, kind, detail string, field string) fakeReply {
	p := map[string]any{"type": "urn:ratekeeper:problem:" + kind, "title": kind, "status": status, "detail": detail}
	if field != "" {
		p["field"] = field
		p["errors"] = []map[string]string{{"field": field, "message": "is wrong"}}
	}
	raw, _ := json.Marshal(p)
	return fakeReply{status, string(raw), map[string]string{"Content-Type": "application/problem+json"}}
}

func TestNewValidates(t *testing.T) {
	for _, url := range []string{"", "127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := New(url, testKey); err == nil {
			t.Errorf("New(%q) accepted", url)
		}
	}
	if _, err := New("http://127.0.0.1:1", ""); err == nil {
		t.Error("an empty API key was accepted")
	}
	if _, err := New("http://127.0.0.1:1", testKey, WithTimeout(0)); err == nil {
		t.Error("a zero timeout was accepted")
	}
	if _, err := New("http://127.0.0.1:1", testKey, WithDenialCacheSize(-1)); err == nil {
		t.Error("a negative cache size was accepted")
	}
}

func TestAPIKeyNeverPrinted(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1")
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, c); strings.Contains(s, testKey) {
			t.Errorf("%s shows the API key: %s", format, s)
		}
	}
}

func TestAcquireSendsTheRequestAndReadsTheDecision(t *testing.T) {
	f := newFakeServer(t, grant(4))
	c := newClient(t, f.URL+"/")
	d, err := c.Acquire(context.Background(), "orders.create", Permits(2), Key("u1"))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Remaining != 4 || d.Limit != 5 || d.ResetAfter != time.Second || d.PolicyVersion != 1 || !d.Enforced || d.Degraded || d.Cached {
		t.Fatalf("decision: %+v", d)
	}
	if d.Header.Get("RateLimit-Policy") != `"p";q=5` || d.Header.Get("Content-Type") != "" {
		t.Fatalf("headers: %v", d.Header)
	}
	r := f.request(0)
	if r.path != "/v1/acquire" || r.body["resource"] != "orders.create" || r.body["permits"] != 2.0 || r.body["key"] != "u1" {
		t.Fatalf("request: %+v", r)
	}
	if got := r.header.Get("Authorization"); got != "Bearer "+testKey {
		t.Fatalf("Authorization: %q", got)
	}
	if got := r.header.Get("User-Agent"); got != "ratekeeper-go/"+Version {
		t.Fatalf("User-Agent: %q", got)
	}
}

func TestOptionalFieldsAbsent(t *testing.T) {
	f := newFakeServer(t, fakeReply{200, `{"allowed":true,"degraded":true,"enforced":false}`, nil})
	d, err := newClient(t, f.URL).Acquire(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != -1 || d.Limit != -1 || !d.Degraded || d.Enforced || d.present != 0 {
		t.Fatalf("decision: %+v", d)
	}
}

func TestDenialIsADecisionAndIsCached(t *testing.T) {
	f := newFakeServer(t, deny(60000), grant(0))
	c := newClient(t, f.URL)
	ctx := context.Background()
	d, err := c.Acquire(ctx, "p", Permits(2))
	if err != nil || d.Allowed || d.RetryAfter != time.Minute || d.Header.Get("Retry-After") != "1" {
		t.Fatalf("denial: %+v %v", d, err)
	}
	d, err = c.Acquire(ctx, "p", Permits(3))
	if err != nil || d.Allowed || !d.Cached || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
		t.Fatalf("cached denial: %+v %v", d, err)
	}
	if f.count() != 1 {
		t.Fatalf("the cached denial sent a request (%d)", f.count())
	}
	// Fewer permits than were denied ask the server; its grant drops the entry.
	if d, err = c.Acquire(ctx, "p", Permits(1)); err != nil || !d.Allowed {
		t.Fatalf("grant: %+v %v", d, err)
	}
	if d, err = c.Acquire(ctx, "p", Permits(2)); err != nil || !d.Allowed || d.Cached || f.count() != 3 {
		t.Fatalf("after the grant: %+v %v (%d requests)", d, err, f.count())
	}
}

func TestRefundAndReleaseDropTheDenial(t *testing.T) {
	f := newFakeServer(t, deny(60000), grant(1), deny(60000), fakeReply{200, `{"released":true,"permits":1,"remaining":2}`, nil}, grant(1))
	c := newClient(t, f.URL)
	ctx := context.Background()
	c.Acquire(ctx, "p", Key("k"))
	if d, err := c.Refund(ctx, "p", 1, Key("k")); err != nil || d.Remaining != 1 {
		t.Fatalf("refund: %+v %v", d, err)
	}
	if r := f.request(1); r.path != "/v1/refund" || r.body["permits"] != 1.0 || r.body["key"] != "k" {
		t.Fatalf("refund request: %+v", r)
	}
	if d, _ := c.Acquire(ctx, "p", Key("k")); d.Cached {
		t.Fatal("the refund did not drop the denial")
	}
	rel, err := c.Release(ctx, "p", "0123456789abcdef0123456789abcdef", Key("k"))
	if err != nil || rel != (Released{true, 1, 2}) {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if r := f.request(3); r.path != "/v1/release" || r.body["lease_id"] != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("release request: %+v", r)
	}
	if d, _ := c.Acquire(ctx, "p", Key("k")); d.Cached || !d.Allowed {
		t.Fatal("the release did not drop the denial")
	}
}

func TestDenialCacheOffSendsEveryCall(t *testing.T) {
	f := newFakeServer(t, deny(60000))
	c := newClient(t, f.URL, WithDenialCacheSize(0))
	for i := 0; i < 3; i++ {
		if d, _ := c.Acquire(context.Background(), "p"); d.Cached {
			t.Fatal("answered from a cache that is off")
		}
	}
	if f.count() != 3 {
		t.Fatalf("%d requests, want 3", f.count())
	}
}

func TestCheckSendsZeroPermits(t *testing.T) {
	f := newFakeServer(t, grant(5))
	c := newClient(t, f.URL)
	if _, err := c.Check(context.Background(), "p", Permits(9)); err != nil {
		t.Fatal(err)
	}
	if got := f.request(0).body["permits"]; got != 0.0 {
		t.Fatalf("permits %v, want 0", got)
	}
}

func TestAcquireAll(t *testing.T) {
	f := newFakeServer(t, fakeReply{429, `{"allowed":false,"results":[` +
		`{"allowed":true,"remaining":3,"limit":5,"retry_after_ms":0,"reset_after_ms":10,"policy_version":1},` +
		`{"allowed":false,"remaining":0,"limit":2,"retry_after_ms":60000,"reset_after_ms":90000,"policy_version":2}]}`,
		map[string]string{"Retry-After": "60"}})
	c := newClient(t, f.URL)
	ctx := context.Background()
	all, err := c.AcquireAll(ctx, []Item{{Resource: "a", Key: "u"}, {Resource: "b", Permits: 2}, {Resource: "c", Permits: CheckPermits}})
	if err != nil {
		t.Fatal(err)
	}
	if all.Allowed || len(all.Results) != 2 || !all.Results[0].Allowed || all.Results[1].Allowed || all.Header.Get("Retry-After") != "60" {
		t.Fatalf("all: %+v", all)
	}
	items := f.request(0).body["all"].([]any)
	want := []map[string]any{{"resource": "a", "key": "u", "permits": 1.0}, {"resource": "b", "permits": 2.0}, {"resource": "c", "permits": 0.0}}
	for i, w := range want {
		got := items[i].(map[string]any)
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("item %d: %v, want %v", i, got, w)
		}
	}
	// The denied item is remembered: a single acquire of it is answered locally.
	if d, _ := c.Acquire(ctx, "b", Permits(2)); !d.Cached {
		t.Fatalf("the denied item was not remembered: %+v", d)
	}
	// acquire_all itself always asks.
	c.AcquireAll(ctx, []Item{{Resource: "b", Permits: 2}})
	if f.count() != 2 {
		t.Fatalf("%d requests, want 2", f.count())
	}
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		reply fakeReply
		kind  error
	}{
		{problem(400, "malformed", "broken JSON", "resource"), ErrBadRequest},
		{problem(401, "unauthorized", "no such key", ""), ErrUnauthorized},
		{problem(403, "forbidden", "may not", ""), ErrForbidden},
		{problem(404, "not-found", "no policy", ""), ErrNotFound},
		{problem(404, "lease-not-held", "no lease", ""), ErrNotFound},
		{problem(409, "not-a-lease-policy", "no leases", ""), ErrConflict},
		{problem(422, "validation", "permits: too many", "permits"), ErrInvalid},
		{problem(503, "unavailable", "redis", ""), ErrUnavailable},
		{problem(500, "internal", "oops", ""), ErrUnexpected},
		{fakeReply{502, "<html>bad gateway</html>", map[string]string{"Content-Type": "text/html"}}, ErrUnexpected},
		{fakeReply{404, "nothing here", map[string]string{"Content-Type": "text/plain"}}, ErrNotFound},
		{fakeReply{200, "not json", nil}, ErrUnexpected},
	}
	sentinels := []error{ErrBadRequest, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable, ErrTransport, ErrUnexpected}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d_%s", tc.reply.status, tc.kind), func(t *testing.T) {
			f := newFakeServer(t, tc.reply)
			_, err := newClient(t, f.URL).Acquire(context.Background(), "p")
			for _, s := range sentinels {
				if errors.Is(err, s) != (s == tc.kind) {
					t.Fatalf("errors.Is(%v, %v) = %v", err, s, errors.Is(err, s))
				}
			}
			var rkErr *Error
			if !errors.As(err, &rkErr) || rkErr.Status != tc.reply.status {
				t.Fatalf("not an *Error with the status: %#v", err)
			}
			if strings.Contains(tc.reply.header["Content-Type"], "problem") {
				if !strings.HasPrefix(rkErr.Type, "urn:ratekeeper:problem:") || rkErr.Detail == "" || rkErr.Title == "" {
					t.Fatalf("problem fields: %+v", rkErr)
				}
			}
			if tc.kind == ErrInvalid && (rkErr.Field != "permits" || len(rkErr.Errors) != 1 || rkErr.Errors[0].Field != "permits") {
				t.Fatalf("fields: %+v", rkErr)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	e := problemError(422, []byte(`{"type":"urn:ratekeeper:problem:validation","title":"Invalid input","status":422,"detail":"permits: must be at most 2","errors":[{"field":"permits","message":"must be at most 2"}]}`))
	if got := e.Error(); got != "ratekeeper: invalid input (422): permits: must be at most 2" {
		t.Fatalf("%q", got)
	}
	if e.Field != "permits" {
		t.Fatalf("the first errors[].field is not Field: %+v", e)
	}
	if got := (&Error{}).Error(); got != "ratekeeper: error" {
		t.Fatalf("%q", got)
	}
}

func TestTimeoutIsADegradedDecision(t *testing.T) {
	url := silentListener(t)
	c := newClient(t, url, WithTimeout(100*time.Millisecond))
	ctx := context.Background()
	d, err := c.Acquire(ctx, "p")
	if err != nil || d.Allowed || !d.Degraded || d.Remaining != -1 || d.Cause == nil {
		t.Fatalf("fail closed: %+v %v", d, err)
	}
	if !errors.Is(d.Cause, ErrTransport) {
		t.Fatalf("cause: %v", d.Cause)
	}
	if d, err = c.Acquire(ctx, "p", FailOpen(true), Timeout(50*time.Millisecond)); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("fail open per call: %+v %v", d, err)
	}
	if d, err = c.Check(ctx, "p"); err != nil || d.Allowed || !d.Degraded {
		t.Fatalf("check: %+v %v", d, err)
	}
	all, err := c.AcquireAll(ctx, []Item{{Resource: "a"}, {Resource: "b"}}, FailOpen(true))
	if err != nil || !all.Allowed || len(all.Results) != 2 || !all.Results[0].Degraded || !all.Results[1].Allowed {
		t.Fatalf("acquire all: %+v %v", all, err)
	}
	if _, err := c.Refund(ctx, "p", 1); !errors.Is(err, ErrTransport) {
		t.Fatalf("refund: %v", err)
	}
	if _, err := c.Release(ctx, "p", "00"); !errors.Is(err, ErrTransport) {
		t.Fatalf("release: %v", err)
	}
	// A degraded denial is not remembered.
	if c.cache.len() != 0 {
		t.Fatal("a degraded denial went into the denial cache")
	}
}

func TestClientFailOpenDefault(t *testing.T) {
	c := newClient(t, silentListener(t), WithTimeout(50*time.Millisecond), WithFailOpen(true))
	if d, err := c.Acquire(context.Background(), "p"); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("%+v %v", d, err)
	}
	if d, _ := c.Acquire(context.Background(), "p", FailOpen(false)); d.Allowed {
		t.Fatal("the call's fail_open did not override the client's")
	}
}

func TestCanceledContextIsAnError(t *testing.T) {
	c := newClient(t, silentListener(t), WithTimeout(10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := c.Acquire(ctx, "p"); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

// countingDialer fails its first `refuse` dials with the given error, then dials for real.
type countingDialer struct {
	calls  int32
	refuse int32
	err    error
}

func (d *countingDialer) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			n := atomic.AddInt32(&d.calls, 1)
			if n <= d.refuse {
				return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", d.err)}
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

func TestRetriesOnlyARefusedConnection(t *testing.T) {
	f := newFakeServer(t, grant(1))
	t.Run("refused_then_up", func(t *testing.T) {
		dialer := &countingDialer{refuse: 2, err: syscall.ECONNREFUSED}
		c := newClient(t, f.URL, WithHTTPClient(dialer.client()), WithTimeout(5*time.Second))
		d, err := c.Acquire(context.Background(), "p")
		if err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("%+v %v", d, err)
		}
		if dialer.calls != 3 {
			t.Fatalf("%d dials, want 3 (2 retries)", dialer.calls)
		}
	})
	t.Run("refused_thrice", func(t *testing.T) {
		dialer := &countingDialer{refuse: 100, err: syscall.ECONNREFUSED}
		c := newClient(t, f.URL, WithHTTPClient(dialer.client()), WithTimeout(5*time.Second))
		d, err := c.Acquire(context.Background(), "p")
		if err != nil || d.Allowed || !d.Degraded || !errors.Is(d.Cause, syscall.ECONNREFUSED) {
			t.Fatalf("%+v %v", d, err)
		}
		if dialer.calls != 3 {
			t.Fatalf("%d dials, want 3 (at most 2 retries)", dialer.calls)
		}
	})
	t.Run("other_errors_not_retried", func(t *testing.T) {
		for _, e := range []syscall.Errno{syscall.ECONNRESET, syscall.EHOSTUNREACH, syscall.ETIMEDOUT} {
			dialer := &countingDialer{refuse: 100, err: e}
			c := newClient(t, f.URL, WithHTTPClient(dialer.client()), WithTimeout(5*time.Second))
			if d, _ := c.Acquire(context.Background(), "p"); !d.Degraded {
				t.Fatalf("%v: %+v", e, d)
			}
			if dialer.calls != 1 {
				t.Fatalf("%v: %d dials, want 1 (no retry)", e, dialer.calls)
			}
		}
	})
	t.Run("never_past_the_timeout", func(t *testing.T) {
		// The first backoff (25-75ms) does not fit in a 20ms timeout: no retry.
		dialer := &countingDialer{refuse: 100, err: syscall.ECONNREFUSED}
		c := newClient(t, f.URL, WithHTTPClient(dialer.client()), WithTimeout(20*time.Millisecond))
		if d, _ := c.Acquire(context.Background(), "p"); !d.Degraded {
			t.Fatalf("%+v", d)
		}
		if dialer.calls != 1 {
			t.Fatalf("%d dials, want 1", dialer.calls)
		}
	})
	t.Run("real_refused_port", func(t *testing.T) {
		c := newClient(t, refusedURL(t), WithTimeout(5*time.Second))
		d, err := c.Acquire(context.Background(), "p", FailOpen(true))
		if err != nil || !d.Allowed || !d.Degraded || !errors.Is(d.Cause, syscall.ECONNREFUSED) {
			t.Fatalf("%+v %v", d, err)
		}
	})
}

func TestWaitSleepsByRetryAfterThenGrants(t *testing.T) {
	f := newFakeServer(t, deny(30), deny(30), grant(0))
	c := newClient(t, f.URL)
	d, err := c.Acquire(context.Background(), "p", Wait(5*time.Second))
	if err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	// Each denial was waited out (its cached copy never answered): three requests.
	if f.count() != 3 {
		t.Fatalf("%d requests, want 3", f.count())
	}
}

func TestWaitReturnsAtOnceWhenThePermitsCannotComeInTime(t *testing.T) {
	f := newFakeServer(t, deny(60000), grant(0))
	c := newClient(t, f.URL)
	done := make(chan struct{})
	var d Decision
	var err error
	go func() {
		defer close(done)
		d, err = c.Acquire(context.Background(), "p", Wait(time.Second))
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not return")
	}
	if err != nil || d.Allowed || d.RetryAfter != time.Minute || f.count() != 1 {
		t.Fatalf("%+v %v (%d requests)", d, err, f.count())
	}
}

func TestWaitRespectsTheContext(t *testing.T) {
	f := newFakeServer(t, deny(2000), grant(0))
	c := newClient(t, f.URL)
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		d, err := c.Acquire(ctx, "p", Wait(time.Minute))
		if !errors.Is(err, context.Canceled) || d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	})
	t.Run("deadline_shorter_than_the_retry", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		// The denial (2s, now cached) cannot be waited out before the deadline: at once.
		d, err := c.Acquire(ctx, "p", Wait(time.Minute))
		if err != nil || d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	})
}

func TestLease(t *testing.T) {
	lease := `{"allowed":true,"remaining":0,"limit":1,"retry_after_ms":0,"reset_after_ms":0,"policy_version":1,"lease_id":"0123456789abcdef0123456789abcdef"}`
	f := newFakeServer(t, fakeReply{200, lease, nil}, fakeReply{200, `{"released":true,"permits":1,"remaining":1}`, nil}, deny(60000))
	c := newClient(t, f.URL)
	ctx := context.Background()
	l, err := c.Lease(ctx, "reports", Key("k"))
	if err != nil || l.ID() != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("%+v %v", l, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil || f.count() != 2 {
		t.Fatalf("a second release sent a request or failed: %v (%d)", err, f.count())
	}
	if r := f.request(1); r.path != "/v1/release" || r.body["key"] != "k" || r.body["lease_id"] != l.ID() {
		t.Fatalf("release request: %+v", r)
	}
	_, err = c.Lease(ctx, "reports")
	var denied *DeniedError
	if !errors.As(err, &denied) || !errors.Is(err, ErrDenied) || denied.Decision.RetryAfter != time.Minute {
		t.Fatalf("denial: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	f := newFakeServer(t, deny(10), grant(1), deny(10), grant(1))
	c := newClient(t, f.URL)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				c.Acquire(context.Background(), fmt.Sprint("p", i%3), Key(fmt.Sprint(j%2)), Wait(50*time.Millisecond))
				c.Refund(context.Background(), "p0", 1)
			}
		}(i)
	}
	wg.Wait()
}
