// Package expectations remembers the Pods a controller has just created or deleted until its informer
// cache shows them, so that a reconcile running on a cache that lags behind its own writes does not
// act twice (the way ReplicaSet and KubeRay guard their scaling).
//
// After each create or delete the controller calls Expect; before scaling a group it asks Satisfied
// and, if not, leaves the group alone for this pass (the cache event that satisfies it triggers the
// next). An expectation also ends after Timeout, so a Pod removed by someone else before the cache
// ever saw it (or one stuck terminating) cannot wedge the group.
package expectations

import (
	"sync"
	"time"
)

// Action is what was done to a Pod.
type Action int

const (
	// Create: the Pod was created and should appear in the cache.
	Create Action = iota
	// Delete: the Pod was deleted and should disappear from the cache.
	Delete
)

// Group names a set of Pods that scale together: a RayCluster's head, or one of its worker groups.
type Group struct {
	Namespace, Cluster, Name string
}

// DefaultTimeout is how long an expectation holds at most (KubeRay: 30 s).
const DefaultTimeout = 30 * time.Second

type expectation struct {
	action Action
	at     time.Time
}

// Expectations is safe for concurrent use. The zero value is not usable; call New.
type Expectations struct {
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	groups map[Group]map[string]expectation // Pod name -> expectation
}

// New returns empty Expectations whose entries expire after timeout (DefaultTimeout if <= 0).
func New(timeout time.Duration) *Expectations {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Expectations{timeout: timeout, now: time.Now, groups: map[Group]map[string]expectation{}}
}

// Expect records that pod of g was just created or deleted.
func (e *Expectations) Expect(g Group, pod string, a Action) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.groups[g] == nil {
		e.groups[g] = map[string]expectation{}
	}
	e.groups[g][pod] = expectation{action: a, at: e.now()}
}

// Satisfied reports whether the cache has caught up with every expectation of g: each created Pod is
// in it and each deleted Pod is gone, as inCache tells (an error from inCache leaves that expectation
// pending). Met and expired expectations are dropped.
func (e *Expectations) Satisfied(g Group, inCache func(pod string) (bool, error)) bool {
	e.mu.Lock()
	pending := make(map[string]expectation, len(e.groups[g]))
	for name, x := range e.groups[g] {
		pending[name] = x
	}
	e.mu.Unlock()

	ok := true
	var done []string
	for name, x := range pending {
		present, err := inCache(name)
		met := err == nil && (x.action == Create) == present
		if met || e.now().Sub(x.at) > e.timeout {
			done = append(done, name)
			continue
		}
		ok = false
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range done {
		// Only drop what was checked: a newer Expect for the same name stays.
		if cur, found := e.groups[g][name]; found && cur == pending[name] {
			delete(e.groups[g], name)
		}
	}
	if len(e.groups[g]) == 0 {
		delete(e.groups, g)
	}
	return ok
}

// Forget drops every expectation of the cluster (for when it is gone).
func (e *Expectations) Forget(namespace, cluster string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for g := range e.groups {
		if g.Namespace == namespace && g.Cluster == cluster {
			delete(e.groups, g)
		}
	}
}

// Len returns the number of pending expectations (for tests and diagnostics).
func (e *Expectations) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, m := range e.groups {
		n += len(m)
	}
	return n
}
