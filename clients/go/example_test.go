package ratekeeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	ratekeeper "github.com/ratekeeper/ratekeeper/clients/go"
)

func Example() {
	server := exampleServer() // a stand-in for a ratekeeper server, such as http://127.0.0.1:8080
	defer server.Close()

	client, err := ratekeeper.New(server.URL, "rk_live_example")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		d, err := client.Acquire(ctx, "orders.create")
		if err != nil {
			log.Fatal(err) // a request the server refused: unknown policy, bad key...
		}
		if d.Allowed {
			fmt.Printf("allowed, %d left of %d\n", d.Remaining, d.Limit)
		} else {
			fmt.Printf("denied, retry in about %.0fs\n", d.RetryAfter.Seconds())
		}
	}
	// Output:
	// allowed, 1 left of 2
	// allowed, 0 left of 2
	// denied, retry in about 1000s
}

func ExampleClient_Acquire_wait() {
	server := exampleServer()
	defer server.Close()
	client, _ := ratekeeper.New(server.URL, "rk_live_example")
	ctx := context.Background()

	client.Acquire(ctx, "search") // the bucket holds 1 permit, back 50ms later
	// Waits (by the server's retry time, not by polling) for up to a second.
	d, err := client.Acquire(ctx, "search", ratekeeper.Wait(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("allowed after waiting:", d.Allowed)
	// A permit that cannot come within the bound: the denial at once, without sleeping.
	client.Acquire(ctx, "orders.create", ratekeeper.Permits(2))
	d, _ = client.Acquire(ctx, "orders.create", ratekeeper.Wait(time.Second))
	fmt.Println("allowed:", d.Allowed)
	// Output:
	// allowed after waiting: true
	// allowed: false
}

func ExampleClient_Acquire_failOpen() {
	// Nothing answers there: the call returns a degraded decision, not an error.
	client, _ := ratekeeper.New("http://127.0.0.1:1", "rk_live_example",
		ratekeeper.WithTimeout(200*time.Millisecond), ratekeeper.WithFailOpen(true))
	d, err := client.Acquire(context.Background(), "orders.create")
	fmt.Println("allowed:", d.Allowed, "degraded:", d.Degraded, "error:", err)
	// Output:
	// allowed: true degraded: true error: <nil>
}

func ExampleClient_Acquire_errors() {
	server := exampleServer()
	defer server.Close()
	client, _ := ratekeeper.New(server.URL, "rk_live_example")

	_, err := client.Acquire(context.Background(), "no.such.policy")
	fmt.Println(errors.Is(err, ratekeeper.ErrNotFound))
	var rkErr *ratekeeper.Error
	if errors.As(err, &rkErr) {
		fmt.Println(rkErr.Status, rkErr.Type)
	}
	// Output:
	// true
	// 404 urn:ratekeeper:problem:not-found
}

func ExampleClient_Lease() {
	server := exampleServer()
	defer server.Close()
	client, _ := ratekeeper.New(server.URL, "rk_live_example")
	ctx := context.Background()

	export := func() error {
		lease, err := client.Lease(ctx, "reports.export") // a concurrency policy of 1
		if err != nil {
			return err // *ratekeeper.DeniedError when all its permits are held
		}
		defer lease.Release(context.Background())
		// A second export meanwhile is denied.
		_, err = client.Lease(ctx, "reports.export")
		fmt.Println("second:", errors.Is(err, ratekeeper.ErrDenied))
		return nil
	}
	fmt.Println("first:", export())
	fmt.Println("after release:", export())
	// Output:
	// second: true
	// first: <nil>
	// second: true
	// after release: <nil>
}

func ExampleClient_AcquireAll() {
	server := exampleServer()
	defer server.Close()
	client, _ := ratekeeper.New(server.URL, "rk_live_example")

	all, err := client.AcquireAll(context.Background(), []ratekeeper.Item{
		{Resource: "orders.create"},
		{Resource: "search"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(all.Allowed, len(all.Results))
	// Output:
	// true 2
}

func ExampleMiddleware() {
	server := exampleServer()
	defer server.Close()
	client, _ := ratekeeper.New(server.URL, "rk_live_example")

	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "order placed\n")
	})
	byUser := func(r *http.Request) string { return r.Header.Get("X-User") }
	mux := http.NewServeMux()
	mux.Handle("/orders", ratekeeper.Middleware(client, "orders.create", byUser)(orders))

	app := httptest.NewServer(mux)
	defer app.Close()
	for i := 0; i < 3; i++ {
		resp, err := http.Post(app.URL+"/orders", "text/plain", nil)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			fmt.Println(resp.StatusCode, "retry after", resp.Header.Get("Retry-After"))
		} else {
			fmt.Println(resp.StatusCode)
		}
	}
	// Output:
	// 200
	// 200
	// 429 retry after 1000
}

// exampleServer imitates a ratekeeper server's client API for the examples: the token
// buckets orders.create (2 permits, one back every 1000 s) and search (1 permit, back
// in 50 ms), and the concurrency policy reports.export (1 lease).
func exampleServer() *httptest.Server {
	type bucket struct {
		capacity, rate, tokens float64
		at                     time.Time
	}
	var mu sync.Mutex
	buckets := map[string]*bucket{
		"orders.create": {capacity: 2, rate: 0.001, tokens: 2, at: time.Now()},
		"search":        {capacity: 1, rate: 20, tokens: 1, at: time.Now()},
	}
	leases := map[string]bool{}
	type item struct {
		Resource string `json:"resource"`
		Permits  *int   `json:"permits"`
	}
	decide := func(it item) (map[string]any, int) {
		permits := 1.0
		if it.Permits != nil {
			permits = float64(*it.Permits)
		}
		if it.Resource == "reports.export" {
			if len(leases) > 0 {
				return map[string]any{"allowed": false, "remaining": 0, "limit": 1, "retry_after_ms": 1000.0, "reset_after_ms": 1000}, 429
			}
			id := fmt.Sprintf("%032x", time.Now().UnixNano())
			leases[id] = true
			return map[string]any{"allowed": true, "remaining": 0, "limit": 1, "retry_after_ms": 0, "reset_after_ms": 0, "lease_id": id}, 200
		}
		b, ok := buckets[it.Resource]
		if !ok {
			return nil, 404
		}
		now := time.Now()
		b.tokens = math.Min(b.capacity, b.tokens+b.rate*now.Sub(b.at).Seconds())
		b.at = now
		reply := map[string]any{"limit": b.capacity, "policy_version": 1}
		if b.tokens >= permits {
			b.tokens -= permits
			reply["allowed"], reply["retry_after_ms"] = true, 0
		} else {
			reply["allowed"] = false
			reply["retry_after_ms"] = math.Ceil((permits - b.tokens) / b.rate * 1000)
		}
		reply["remaining"] = math.Floor(b.tokens)
		reply["reset_after_ms"] = math.Ceil((b.capacity - b.tokens) / b.rate * 1000)
		if reply["allowed"] == true {
			return reply, 200
		}
		return reply, 429
	}
	notFound := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(404)
		io.WriteString(w, `{"type":"urn:ratekeeper:problem:not-found","title":"Not found","status":404,"detail":"no such policy"}`)
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var body struct {
			item
			All     []item `json:"all"`
			LeaseID string `json:"lease_id"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/release":
			delete(leases, body.LeaseID)
			io.WriteString(w, `{"released":true,"permits":1,"remaining":1}`)
		case body.All != nil:
			results := []map[string]any{}
			for _, it := range body.All {
				reply, status := decide(it)
				if status == 404 {
					notFound(w)
					return
				}
				results = append(results, reply)
			}
			json.NewEncoder(w).Encode(map[string]any{"allowed": true, "results": results})
		default:
			reply, status := decide(body.item)
			if status == 404 {
				notFound(w)
				return
			}
			if status == 429 {
				w.Header().Set("Retry-After", fmt.Sprint(int(math.Ceil(reply["retry_after_ms"].(float64)/1000))))
			}
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(reply)
		}
	}))
}
