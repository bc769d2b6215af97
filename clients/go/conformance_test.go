package ratekeeper

// The conformance scenarios shared by every ratekeeper client library
// (clients/conformance/scenarios/*.json), one subtest per scenario file, run against the
// server a fixture names. RK_CONFORMANCE_FIXTURE is the fixture's path
// ({"url", "prefix", "keys": {"caller", "stranger"}, "unreachable_url"}); without it,
// every scenario is skipped. RK_CONFORMANCE_SCENARIOS overrides the scenarios'
// directory.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

type fixture struct {
	URL            string            `json:"url"`
	Prefix         string            `json:"prefix"`
	Keys           map[string]string `json:"keys"`
	UnreachableURL string            `json:"unreachable_url"`
}

type scenario struct {
	Description string          `json:"description"`
	Policies    json.RawMessage `json:"policies"` // the harness's: made before the run
	Steps       []step          `json:"steps"`
}

type step struct {
	Op          string                     `json:"op"`
	Resource    *string                    `json:"resource"`
	Key         *string                    `json:"key"`
	Permits     *int64                     `json:"permits"`
	Items       []stepItem                 `json:"items"`
	LeaseIDFrom *int                       `json:"lease_id_from"`
	As          string                     `json:"as"`
	Server      string                     `json:"server"`
	FailOpen    *bool                      `json:"fail_open"`
	TimeoutMs   *int64                     `json:"timeout_ms"`
	WaitMs      *int64                     `json:"wait_ms"`
	Expect      map[string]json.RawMessage `json:"expect"`
}

type stepItem struct {
	Resource string  `json:"resource"`
	Key      *string `json:"key"`
	Permits  *int64  `json:"permits"`
}

const madeUpKey = "rk_live_madeupmadeupmadeupmadeupmadeup0"

func scenariosDir() string {
	if dir := os.Getenv("RK_CONFORMANCE_SCENARIOS"); dir != "" {
		return dir
	}
	return filepath.Join("..", "conformance", "scenarios")
}

func TestConformance(t *testing.T) {
	dir := scenariosDir()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	fixturePath := os.Getenv("RK_CONFORMANCE_FIXTURE")
	if len(paths) == 0 {
		if fixturePath != "" {
			t.Fatalf("no scenario (*.json) in %s", dir)
		}
		t.Skipf("no scenario in %s and RK_CONFORMANCE_FIXTURE is not set", dir)
	}
	var fx fixture
	if fixturePath != "" {
		raw, err := os.ReadFile(fixturePath)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &fx); err != nil {
			t.Fatalf("%s: %v", fixturePath, err)
		}
	}
	for _, path := range paths {
		path := path
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			if fixturePath == "" {
				t.Skip("RK_CONFORMANCE_FIXTURE is not set")
			}
			runScenario(t, path, fx)
		})
	}
}

// outcome is what one step gave: the fields of its result as the scenarios name them,
// or an error.
type outcome struct {
	fields  map[string]any
	headers http.Header
	results []outcome
	err     error
}

func runScenario(t *testing.T, path string, fx fixture) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Strict: a field this runner does not know fails the scenario rather than going
	// unnoticed.
	var sc scenario
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// A fresh client per role and server: no denial cache leaks between scenarios.
	keys := map[string]string{"caller": fx.Keys["caller"], "stranger": fx.Keys["stranger"], "bad_key": madeUpKey}
	urls := map[string]string{"real": fx.URL, "unreachable": fx.UnreachableURL}
	clients := map[[2]string]*Client{}
	for role, key := range keys {
		for server, url := range urls {
			c, err := New(url, key, WithTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			clients[[2]string{role, server}] = c
		}
	}
	var outcomes []outcome
	for i, st := range sc.Steps {
		label := fmt.Sprintf("step %d (%s %s)", i, st.Op, deref(st.Resource))
		role, server := st.As, st.Server
		if role == "" {
			role = "caller"
		}
		if server == "" {
			server = "real"
		}
		client := clients[[2]string{role, server}]
		if client == nil {
			t.Fatalf("%s: unknown as %q or server %q", label, role, server)
		}
		started := time.Now()
		got := runStep(t, label, st, fx.Prefix, client, outcomes)
		elapsed := time.Since(started)
		outcomes = append(outcomes, got)
		checkStep(t, label, st.Expect, got)
		if st.WaitMs != nil && got.err == nil && got.fields["allowed"] == false &&
			elapsed > time.Duration(*st.WaitMs)*time.Millisecond {
			t.Errorf("%s: a wait of %dms took %s", label, *st.WaitMs, elapsed)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func runStep(t *testing.T, label string, st step, prefix string, c *Client, earlier []outcome) outcome {
	ctx := context.Background()
	resource := prefix + "." + deref(st.Resource)
	var opts []CallOption
	if st.Key != nil {
		opts = append(opts, Key(*st.Key))
	}
	if st.FailOpen != nil {
		opts = append(opts, FailOpen(*st.FailOpen))
	}
	if st.TimeoutMs != nil {
		opts = append(opts, Timeout(time.Duration(*st.TimeoutMs)*time.Millisecond))
	}
	if st.WaitMs != nil {
		opts = append(opts, Wait(time.Duration(*st.WaitMs)*time.Millisecond))
	}
	if st.Permits != nil && (st.Op == "acquire" || st.Op == "lease") {
		opts = append(opts, Permits(*st.Permits))
	}
	switch st.Op {
	case "acquire":
		d, err := c.Acquire(ctx, resource, opts...)
		return decisionOutcome(d, err)
	case "check":
		d, err := c.Check(ctx, resource, opts...)
		return decisionOutcome(d, err)
	case "acquire_all":
		items := make([]Item, len(st.Items))
		for i, it := range st.Items {
			items[i] = Item{Resource: prefix + "." + it.Resource, Key: deref(it.Key)}
			if it.Permits != nil {
				items[i].Permits = *it.Permits
				if *it.Permits == 0 {
					items[i].Permits = CheckPermits
				}
			}
		}
		all, err := c.AcquireAll(ctx, items, opts...)
		if err != nil {
			return outcome{err: err}
		}
		o := outcome{fields: map[string]any{"allowed": all.Allowed}, headers: all.Header}
		for _, d := range all.Results {
			o.results = append(o.results, decisionOutcome(d, nil))
		}
		return o
	case "refund":
		permits := int64(1)
		if st.Permits != nil {
			permits = *st.Permits
		}
		d, err := c.Refund(ctx, resource, permits, opts...)
		return decisionOutcome(d, err)
	case "release":
		if st.LeaseIDFrom == nil || *st.LeaseIDFrom >= len(earlier) {
			t.Fatalf("%s: lease_id_from names no earlier step", label)
		}
		leaseID, _ := earlier[*st.LeaseIDFrom].fields["lease_id"].(string)
		if leaseID == "" {
			t.Fatalf("%s: step %d has no lease_id to release", label, *st.LeaseIDFrom)
		}
		r, err := c.Release(ctx, resource, leaseID, opts...)
		if err != nil {
			return outcome{err: err}
		}
		return outcome{fields: map[string]any{"released": r.Released, "permits": r.Permits, "remaining": r.Remaining}}
	case "lease":
		// A scope that holds a concurrency permit and ends at once; a denial is reported
		// as the denied Decision.
		lease, err := c.Lease(ctx, resource, opts...)
		var denied *DeniedError
		if errors.As(err, &denied) {
			return decisionOutcome(denied.Decision, nil)
		}
		if err != nil {
			return outcome{err: err}
		}
		o := decisionOutcome(lease.Decision, nil)
		if err := lease.Release(ctx); err != nil {
			return outcome{err: err}
		}
		return o
	}
	t.Fatalf("%s: unknown op %q", label, st.Op)
	return outcome{}
}

func decisionOutcome(d Decision, err error) outcome {
	if err != nil {
		return outcome{err: err}
	}
	f := map[string]any{
		"allowed":       d.Allowed,
		"enforced":      d.Enforced,
		"degraded":      d.Degraded,
		"shadow_denied": d.ShadowDenied,
		"cached":        d.Cached,
		"lease_id":      d.LeaseID,
	}
	opt := func(name string, bit fields, v int64) {
		if d.present&bit != 0 {
			f[name] = v
		} else {
			f[name] = nil
		}
	}
	opt("remaining", hasRemaining, d.Remaining)
	opt("limit", hasLimit, d.Limit)
	opt("retry_after_ms", hasRetryAfter, d.RetryAfterMs())
	opt("reset_after_ms", hasResetAfter, d.ResetAfterMs())
	opt("policy_version", hasPolicyVersion, d.PolicyVersion)
	return outcome{fields: f, headers: d.Header}
}

// errorName is the scenarios' name of an error's kind.
func errorName(err error) string {
	names := []struct {
		kind error
		name string
	}{
		{ErrBadRequest, "BadRequest"}, {ErrUnauthorized, "Unauthorized"}, {ErrForbidden, "Forbidden"},
		{ErrNotFound, "NotFound"}, {ErrConflict, "Conflict"}, {ErrInvalid, "Invalid"},
		{ErrUnavailable, "Unavailable"}, {ErrTransport, "TransportError"}, {ErrUnexpected, "UnexpectedResponse"},
	}
	for _, n := range names {
		if errors.Is(err, n.kind) {
			return n.name
		}
	}
	return fmt.Sprintf("%T", err)
}

func checkStep(t *testing.T, label string, expect map[string]json.RawMessage, got outcome) {
	t.Helper()
	if wantRaw, ok := expect["error"]; ok {
		var want string
		if err := json.Unmarshal(wantRaw, &want); err != nil {
			t.Fatalf("%s: expect.error: %v", label, err)
		}
		if got.err == nil {
			t.Errorf("%s: want %s, got %v", label, want, got.fields)
			return
		}
		if name := errorName(got.err); name != want {
			t.Errorf("%s: want %s, got %s: %v", label, want, name, got.err)
		}
		if fieldRaw, ok := expect["error_field"]; ok {
			var want *string
			json.Unmarshal(fieldRaw, &want)
			var rkErr *Error
			have := ""
			if errors.As(got.err, &rkErr) {
				have = rkErr.Field
			}
			if want == nil || *want != have {
				t.Errorf("%s: error_field: want %s, got %q", label, fieldRaw, have)
			}
		}
		return
	}
	if got.err != nil {
		t.Errorf("%s: unexpected error %s: %v", label, errorName(got.err), got.err)
		return
	}
	checkFields(t, label, expect, got)
}

func checkFields(t *testing.T, label string, expect map[string]json.RawMessage, got outcome) {
	t.Helper()
	names := make([]string, 0, len(expect))
	for name := range expect {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		wantRaw := expect[name]
		switch name {
		case "error_field":
			t.Errorf("%s: error_field without error", label)
		case "results":
			var want []map[string]json.RawMessage
			if err := json.Unmarshal(wantRaw, &want); err != nil {
				t.Fatalf("%s: expect.results: %v", label, err)
			}
			if len(want) != len(got.results) {
				t.Errorf("%s.results: want %d results, got %d", label, len(want), len(got.results))
				continue
			}
			for i := range want {
				checkFields(t, fmt.Sprintf("%s.results[%d]", label, i), want[i], got.results[i])
			}
		case "headers":
			var want map[string]string
			if err := json.Unmarshal(wantRaw, &want); err != nil {
				t.Fatalf("%s: expect.headers: %v", label, err)
			}
			for header, value := range want {
				have := got.headers.Values(header)
				switch {
				case value == "present" && len(have) == 0:
					t.Errorf("%s: header %s absent", label, header)
				case value == "absent" && len(have) > 0:
					t.Errorf("%s: header %s: want absent, got %q", label, header, have)
				case value != "present" && value != "absent" && (len(have) != 1 || have[0] != value):
					t.Errorf("%s: header %s: want %q, got %q", label, header, value, have)
				}
			}
		case "has_lease_id":
			var want bool
			if err := json.Unmarshal(wantRaw, &want); err != nil {
				t.Fatalf("%s: expect.has_lease_id: %v", label, err)
			}
			if have := got.fields["lease_id"] != nil && got.fields["lease_id"] != ""; have != want {
				t.Errorf("%s: has_lease_id: want %t, got %t", label, want, have)
			}
		default:
			have, known := got.fields[name]
			if !known {
				t.Errorf("%s: %s: no such field in this result (%v)", label, name, got.fields)
				continue
			}
			if problem := checkValue(wantRaw, have); problem != "" {
				t.Errorf("%s.%s: %s", label, name, problem)
			}
		}
	}
}

// checkValue compares a result's value with an expectation: a bool, a number (exact),
// {"min", "max"}, or null (absent).
func checkValue(wantRaw json.RawMessage, have any) string {
	dec := json.NewDecoder(bytes.NewReader(wantRaw))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		return fmt.Sprintf("bad expectation %s: %v", wantRaw, err)
	}
	switch w := want.(type) {
	case nil:
		if have != nil {
			return fmt.Sprintf("want absent, got %v", have)
		}
	case bool:
		if b, ok := have.(bool); !ok || b != w {
			return fmt.Sprintf("want %t, got %v", w, have)
		}
	case json.Number:
		n, ok := have.(int64)
		if !ok || w.String() != fmt.Sprint(n) {
			return fmt.Sprintf("want %s, got %v", w, have)
		}
	case map[string]any:
		n, ok := have.(int64)
		if !ok {
			return fmt.Sprintf("want a number in %s, got %v", wantRaw, have)
		}
		if min, ok := w["min"].(json.Number); ok {
			if m, _ := min.Int64(); n < m {
				return fmt.Sprintf("want at least %s, got %d", min, n)
			}
		}
		if max, ok := w["max"].(json.Number); ok {
			if m, _ := max.Int64(); n > m {
				return fmt.Sprintf("want at most %s, got %d", max, n)
			}
		}
	case string:
		if s, ok := have.(string); !ok || s != w {
			return fmt.Sprintf("want %q, got %v", w, have)
		}
	default:
		return fmt.Sprintf("unsupported expectation %s", wantRaw)
	}
	return ""
}
