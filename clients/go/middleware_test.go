package ratekeeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

func okHandler(calls *int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*calls++
		io.WriteString(w, "done")
	})
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestMiddlewareAgainstAFakeServer(t *testing.T) {
	f := newFakeServer(t, grant(1), deny(1500))
	c := newClient(t, f.URL)
	calls := 0
	var seenKey string
	h := Middleware(c, "orders.create", func(r *http.Request) string {
		seenKey = r.Header.Get("X-User")
		return seenKey
	})(okHandler(&calls))

	req := httptest.NewRequest("GET", "/orders", nil)
	req.Header.Set("X-User", "u1")
	w := serve(h, req)
	if w.Code != 200 || calls != 1 || w.Header().Get("RateLimit-Policy") != `"p";q=5` || w.Header().Get("RateLimit") == "" {
		t.Fatalf("granted: %d %v (calls %d)", w.Code, w.Header(), calls)
	}
	if r := f.request(0); r.body["resource"] != "orders.create" || r.body["key"] != "u1" {
		t.Fatalf("request: %+v", r)
	}
	w = serve(h, req)
	if w.Code != 429 || calls != 1 || w.Header().Get("Retry-After") != "1" || w.Header().Get("RateLimit") == "" {
		t.Fatalf("denied: %d %v", w.Code, w.Header())
	}
	// From the denial cache: still 429 with a Retry-After of at least 1.
	w = serve(h, req)
	if w.Code != 429 || w.Header().Get("Retry-After") == "" || f.count() != 2 {
		t.Fatalf("cached denial: %d %v (%d requests)", w.Code, w.Header(), f.count())
	}
}

func TestMiddlewareWhenTheLimiterFails(t *testing.T) {
	silent := silentListener(t)
	calls := 0
	closed := Middleware(newClient(t, silent, WithTimeout(50*time.Millisecond)), "p", nil)(okHandler(&calls))
	if w := serve(closed, httptest.NewRequest("GET", "/", nil)); w.Code != 503 || calls != 0 {
		t.Fatalf("fail closed: %d (calls %d)", w.Code, calls)
	}
	open := Middleware(newClient(t, silent, WithTimeout(50*time.Millisecond), WithFailOpen(true)), "p", nil)(okHandler(&calls))
	if w := serve(open, httptest.NewRequest("GET", "/", nil)); w.Code != 200 || calls != 1 {
		t.Fatalf("fail open: %d (calls %d)", w.Code, calls)
	}
	f := newFakeServer(t, problem(404, "not-found", "no policy", ""))
	refused := Middleware(newClient(t, f.URL), "p", nil)(okHandler(&calls))
	if w := serve(refused, httptest.NewRequest("GET", "/", nil)); w.Code != 500 || calls != 1 {
		t.Fatalf("refused: %d (calls %d)", w.Code, calls)
	}
}

func TestMiddlewareFuncTakesTheResourceFromTheRequest(t *testing.T) {
	f := newFakeServer(t, grant(1))
	calls := 0
	h := MiddlewareFunc(newClient(t, f.URL), func(r *http.Request) string { return "api" + r.URL.Path }, nil)(okHandler(&calls))
	serve(h, httptest.NewRequest("GET", "/search", nil))
	if r := f.request(0); r.body["resource"] != "api/search" || r.body["key"] != nil {
		t.Fatalf("request: %+v", r)
	}
}

// TestMiddlewareAgainstTheServer runs the middleware against the conformance server
// (RK_CONFORMANCE_FIXTURE), on the scenarios' per_key policy pk-basic (a token bucket of
// 1 permit, refilled once in 1000 s) with a key of its own, so each run has a fresh
// bucket and leaves the scenario's alone.
func TestMiddlewareAgainstTheServer(t *testing.T) {
	path := os.Getenv("RK_CONFORMANCE_FIXTURE")
	if path == "" {
		t.Skip("RK_CONFORMANCE_FIXTURE is not set")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	client, err := New(fx.URL, fx.Keys["caller"], WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 8)
	rand.Read(random)
	user := "middleware-" + hex.EncodeToString(random)

	calls := 0
	app := httptest.NewServer(Middleware(client, fx.Prefix+".pk-basic", func(r *http.Request) string {
		return r.Header.Get("X-User")
	})(okHandler(&calls)))
	defer app.Close()
	get := func() *http.Response {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", app.URL, nil)
		req.Header.Set("X-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := get()
	if resp.StatusCode != 200 || calls != 1 {
		t.Fatalf("first request: %d (calls %d)", resp.StatusCode, calls)
	}
	if resp.Header.Get("RateLimit-Policy") == "" || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("granted without the RateLimit headers: %v", resp.Header)
	}
	for i := 0; i < 2; i++ { // the server's denial, then the cached one
		resp = get()
		if resp.StatusCode != 429 || calls != 1 {
			t.Fatalf("request %d: %d (calls %d)", i+2, resp.StatusCode, calls)
		}
		if resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit") == "" || resp.Header.Get("RateLimit-Policy") == "" {
			t.Fatalf("request %d: denied without Retry-After and the RateLimit headers: %v", i+2, resp.Header)
		}
	}
}
