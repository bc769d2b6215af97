package ratekeeper

import (
	"context"
	"sync"
)

// Lease is a granted permit of a concurrency policy, held until Release. Make one with
// [Client.Lease] and give it back with a deferred Release:
//
//	lease, err := client.Lease(ctx, "reports.export")
//	if err != nil {
//		return err // a *DeniedError when not granted
//	}
//	defer lease.Release(context.Background())
type Lease struct {
	// Decision is the grant.
	Decision Decision

	client   *Client
	resource string
	key      string
	once     sync.Once
	err      error
}

// Lease acquires a permit of resource (a concurrency policy: the grant carries a lease)
// and returns it to be released at the end of the work. A denial is an error wrapping
// the Decision, a [*DeniedError] (errors.Is(err, ErrDenied)); so is a degraded denial
// (the server could not be reached and the call fails closed). A degraded grant (fail
// open) and a grant of a policy that hands out no leases have no lease to give back:
// their Release does nothing. The call options are Acquire's.
func (c *Client) Lease(ctx context.Context, resource string, opts ...CallOption) (*Lease, error) {
	o := c.options(opts)
	d, err := c.acquire(ctx, resource, o)
	if err != nil {
		return nil, err
	}
	if !d.Allowed {
		return nil, &DeniedError{Decision: d}
	}
	return &Lease{Decision: d, client: c, resource: resource, key: o.key}, nil
}

// ID is the lease's id ("" when there is none to give back).
func (l *Lease) ID() string { return l.Decision.LeaseID }

// Release gives the lease back. Only the first call sends a request; later ones return
// its error. A lease never released expires after the policy's lease_ttl_ms.
func (l *Lease) Release(ctx context.Context) error {
	l.once.Do(func() {
		if l.Decision.LeaseID == "" {
			return
		}
		_, l.err = l.client.Release(ctx, l.resource, l.Decision.LeaseID, Key(l.key))
	})
	return l.err
}
