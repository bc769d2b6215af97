package ratekeeper

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// fakeClock is a settable clock for the denial cache.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestCache(max int) (*denialCache, *fakeClock) {
	clock := &fakeClock{t: time.Unix(1700000000, 0)}
	c := newDenialCache(max)
	c.now = clock.now
	return c, clock
}

func denied(retry time.Duration) Decision {
	return Decision{
		Allowed:       false,
		Remaining:     0,
		Limit:         5,
		RetryAfter:    retry,
		ResetAfter:    2 * retry,
		PolicyVersion: 3,
		Enforced:      true,
		Header: http.Header{
			"Ratelimit":        {`"p";r=0;t=3`},
			"Ratelimit-Policy": {`"p";q=5`},
			"Retry-After":      {"3"},
		},
		present: hasRemaining | hasLimit | hasRetryAfter | hasResetAfter | hasPolicyVersion,
	}
}

func TestDenialCacheAnswersAsManyPermitsOrMore(t *testing.T) {
	c, clock := newTestCache(10)
	c.record("p", "u1", 2, denied(3*time.Second))
	if _, ok := c.lookup("p", "u1", 1); ok {
		t.Fatal("fewer permits than denied were answered from the cache")
	}
	clock.advance(time.Second)
	d, ok := c.lookup("p", "u1", 2)
	if !ok {
		t.Fatal("as many permits were not answered from the cache")
	}
	if d.Allowed || !d.Cached || d.Remaining != 0 || d.Limit != 5 || d.PolicyVersion != 3 {
		t.Fatalf("cached decision: %+v", d)
	}
	if d.RetryAfter != 2*time.Second {
		t.Fatalf("retry after: want the 2s left, got %s", d.RetryAfter)
	}
	if d.ResetAfter != 5*time.Second {
		t.Fatalf("reset after: want 6s-1s, got %s", d.ResetAfter)
	}
	if got := d.Header.Get("Retry-After"); got != "2" {
		t.Fatalf("Retry-After: got %q", got)
	}
	if got := d.Header.Get("RateLimit"); got != `"p";r=0;t=2` {
		t.Fatalf("RateLimit: got %q", got)
	}
	if got := d.Header.Get("RateLimit-Policy"); got != `"p";q=5` {
		t.Fatalf("RateLimit-Policy: got %q", got)
	}
	if _, ok := c.lookup("p", "u1", 7); !ok {
		t.Fatal("more permits were not answered from the cache")
	}
	if _, ok := c.lookup("p", "u2", 7); ok {
		t.Fatal("another key was answered from the cache")
	}
	if _, ok := c.lookup("q", "u1", 7); ok {
		t.Fatal("another resource was answered from the cache")
	}
}

func TestDenialCacheRetryAfterNeverZeroWhileItHolds(t *testing.T) {
	c, clock := newTestCache(10)
	c.record("p", "", 1, denied(100*time.Millisecond))
	clock.advance(99*time.Millisecond + 500*time.Microsecond)
	d, ok := c.lookup("p", "", 1)
	if !ok || d.RetryAfter != time.Millisecond || d.RetryAfterMs() != 1 {
		t.Fatalf("want 1ms left, got %v %s", ok, d.RetryAfter)
	}
}

func TestDenialCacheExpires(t *testing.T) {
	c, clock := newTestCache(10)
	c.record("p", "", 1, denied(time.Second))
	clock.advance(time.Second)
	if _, ok := c.lookup("p", "", 1); ok {
		t.Fatal("an expired denial was answered")
	}
	if c.len() != 0 {
		t.Fatalf("the expired entry stayed: %d", c.len())
	}
}

func TestDenialCacheForget(t *testing.T) {
	c, _ := newTestCache(10)
	c.record("p", "k", 1, denied(time.Second))
	c.record("p", "other", 1, denied(time.Second))
	c.forget("p", "k")
	if _, ok := c.lookup("p", "k", 1); ok {
		t.Fatal("a forgotten denial was answered")
	}
	if _, ok := c.lookup("p", "other", 1); !ok {
		t.Fatal("forget dropped another key's denial")
	}
}

func TestDenialCacheRecordsOnlyDecidedDenials(t *testing.T) {
	c, _ := newTestCache(10)
	granted := denied(time.Second)
	granted.Allowed = true
	c.record("a", "", 1, granted)
	deg := degraded(false, nil)
	c.record("b", "", 1, deg)
	noWait := denied(0)
	c.record("c", "", 1, noWait)
	if c.len() != 0 {
		t.Fatalf("recorded %d entries, want none", c.len())
	}
}

func TestDenialCacheEvictsExpiredFirstThenOldest(t *testing.T) {
	c, clock := newTestCache(3)
	c.record("old-long", "", 1, denied(time.Hour))
	c.record("short", "", 1, denied(time.Second))
	c.record("new-long", "", 1, denied(time.Hour))
	clock.advance(2 * time.Second)
	c.record("fourth", "", 1, denied(time.Hour))
	for _, r := range []string{"old-long", "new-long", "fourth"} {
		if _, ok := c.lookup(r, "", 1); !ok {
			t.Fatalf("%s was evicted, while an expired entry was there", r)
		}
	}
	c.record("fifth", "", 1, denied(time.Hour))
	if _, ok := c.lookup("old-long", "", 1); ok {
		t.Fatal("the oldest entry was kept over the bound")
	}
	if c.len() != 3 {
		t.Fatalf("len %d, want the bound 3", c.len())
	}
}

func TestDenialCacheStaysBounded(t *testing.T) {
	c, _ := newTestCache(100)
	for i := 0; i < 1000; i++ {
		c.record(fmt.Sprint("r", i), "", 1, denied(time.Minute))
	}
	if c.len() != 100 {
		t.Fatalf("len %d, want 100", c.len())
	}
	if _, ok := c.lookup("r999", "", 1); !ok {
		t.Fatal("the newest entry is missing")
	}
}

func TestDenialCacheOff(t *testing.T) {
	c := newDenialCache(0)
	c.record("p", "", 1, denied(time.Second))
	if _, ok := c.lookup("p", "", 1); ok {
		t.Fatal("a cache of size 0 answered")
	}
	c.forget("p", "")
}
