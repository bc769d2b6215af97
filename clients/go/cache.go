package ratekeeper

import (
	"container/list"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// DefaultDenialCacheSize is how many denials a client remembers unless told otherwise.
const DefaultDenialCacheSize = 10000

// denialCache remembers recent denials, so that a caller asking again for as many
// permits or more before the retry time is answered without a request. Safe for
// concurrent use; bounded (expired entries are evicted first, then the oldest).
type denialCache struct {
	mu      sync.Mutex
	max     int
	entries map[cacheKey]*list.Element
	order   *list.List // of *denial, oldest first
	now     func() time.Time
}

type cacheKey struct {
	resource, key string
}

type denial struct {
	at      cacheKey
	permits int64
	when    time.Time // when the denial was received
	until   time.Time // when the permits are expected back
	d       Decision
}

func newDenialCache(max int) *denialCache {
	if max <= 0 {
		return nil
	}
	return &denialCache{
		max:     max,
		entries: make(map[cacheKey]*list.Element),
		order:   list.New(),
		now:     time.Now,
	}
}

// lookup answers a call for permits of (resource, key) from a remembered denial, if one
// holds.
func (c *denialCache) lookup(resource, key string, permits int64) (Decision, bool) {
	if c == nil {
		return Decision{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[cacheKey{resource, key}]
	if !ok {
		return Decision{}, false
	}
	e := el.Value.(*denial)
	now := c.now()
	if !now.Before(e.until) {
		c.order.Remove(el)
		delete(c.entries, e.at)
		return Decision{}, false
	}
	if permits < e.permits {
		return Decision{}, false
	}
	return e.answer(now), true
}

// answer is the cached decision at now: the denial with the time left to wait.
func (e *denial) answer(now time.Time) Decision {
	d := e.d
	d.Cached = true
	d.Allowed = false
	d.Remaining = 0
	d.present |= hasRemaining
	left := e.until.Sub(now)
	// Whole milliseconds, rounded up: never 0 while the denial holds.
	left = (left + time.Millisecond - 1).Truncate(time.Millisecond)
	d.RetryAfter = left
	if d.ResetAfter > 0 {
		d.ResetAfter -= now.Sub(e.when)
		if d.ResetAfter < d.RetryAfter {
			d.ResetAfter = d.RetryAfter
		}
		d.ResetAfter = d.ResetAfter.Truncate(time.Millisecond)
	}
	d.Header = cachedHeaders(e.d.Header, left)
	return d
}

var resetParam = regexp.MustCompile(`;t=\d+`)

// cachedHeaders are the headers of the original denial with the times brought up to date.
func cachedHeaders(h http.Header, left time.Duration) http.Header {
	out := http.Header{}
	secs := int64((left + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	for name, values := range h {
		out[name] = append([]string(nil), values...)
	}
	out.Set("Retry-After", strconv.FormatInt(secs, 10))
	if v := out.Get("RateLimit"); v != "" {
		out.Set("RateLimit", resetParam.ReplaceAllString(v, ";t="+strconv.FormatInt(secs, 10)))
	}
	return out
}

// record remembers a denial (one that was decided, with a time to wait).
func (c *denialCache) record(resource, key string, permits int64, d Decision) {
	if c == nil || d.Allowed || d.Degraded || d.Cached || d.RetryAfter <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	at := cacheKey{resource, key}
	if el, ok := c.entries[at]; ok {
		c.order.Remove(el)
		delete(c.entries, at)
	}
	if len(c.entries) >= c.max {
		c.evict(now)
	}
	e := &denial{at: at, permits: permits, when: now, until: now.Add(d.RetryAfter), d: d}
	c.entries[at] = c.order.PushBack(e)
}

// evict makes room for one entry: every expired entry goes, else the oldest.
func (c *denialCache) evict(now time.Time) {
	for el := c.order.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*denial); !now.Before(e.until) {
			c.order.Remove(el)
			delete(c.entries, e.at)
		}
		el = next
	}
	for len(c.entries) >= c.max {
		oldest := c.order.Front()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*denial).at)
	}
}

// forget drops what is remembered of (resource, key): after a grant, a refund or a
// release.
func (c *denialCache) forget(resource, key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	at := cacheKey{resource, key}
	if el, ok := c.entries[at]; ok {
		c.order.Remove(el)
		delete(c.entries, at)
	}
}

func (c *denialCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
