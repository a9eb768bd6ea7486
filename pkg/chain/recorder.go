// Package chain records the trigger chain of rayctl's control plane, one Event per hop: the kubelet's
// Pod status write, the API server accepting a write (from its audit machinery), each controller's
// informer event, predicate decision, handler mapping, enqueue, dequeue, reconcile, status write,
// RayJob state transition and dashboard call. Events link by (object, resourceVersion), so Trace can
// walk from a RayJob's submission back to the kubelet write that made its head Pod ready.
//
// The Recorder keeps the newest events in a fixed-size ring, hands them out with filters, and streams
// new ones to subscribers; Handler serves both over HTTP.
package chain

import (
	"sync"
	"time"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
)

// Hop is the kind of step an Event records.
type Hop string

// The hops of the chain, in the order a change travels them.
const (
	// KubeletWrite: the kubelet wrote a Pod's status (Object carries the resourceVersion it got back).
	KubeletWrite Hop = "kubelet-write"
	// APIWrite: the API server accepted (or refused) a write; Outcome is the verb, Code the HTTP status.
	APIWrite Hop = "api-write"
	// InformerEvent: a controller's cache delivered a watch event (Outcome create/update/delete).
	InformerEvent Hop = "informer"
	// PredicateHop: a predicate passed (Outcome "passed") or dropped ("dropped") an event.
	PredicateHop Hop = "predicate"
	// MapHop: a handler mapped an event's Object to the key To.
	MapHop Hop = "map"
	// MapMiss: a handler mapped an event to no key; Detail says why.
	MapMiss Hop = "map-miss"
	// EnqueueHop: a key entered the work queue; Outcome is the chainhooks.EnqueueKind.
	EnqueueHop Hop = "enqueue"
	// DequeueHop: a worker took a key; Duration is how long it had been ready.
	DequeueHop Hop = "dequeue"
	// ReconcileStart and ReconcileEnd bracket one Reconcile; the end's Outcome is done,
	// requeue-after or error.
	ReconcileStart Hop = "reconcile-start"
	ReconcileEnd   Hop = "reconcile-end"
	// StatusWrite: a controller wrote an object's status (Object carries the new resourceVersion).
	StatusWrite Hop = "status-write"
	// ObjectWrite: a controller created or deleted an object (a Pod it scaled) during a Reconcile;
	// Outcome is the verb, Object carries the resourceVersion the API server returned.
	ObjectWrite Hop = "controller-write"
	// Transition: a RayJob's jobDeploymentStatus changed (Detail "from → to").
	Transition Hop = "transition"
	// DashboardCall: a controller called Ray's dashboard (Detail "METHOD path", Code, Duration).
	DashboardCall Hop = "dashboard-call"
)

// Ref names one object at one resourceVersion.
type Ref = chainhooks.Ref

// Event is one hop.
type Event struct {
	// Seq numbers events in the order they were recorded, from 1.
	Seq uint64 `json:"seq"`
	// Mono is the event's monotonic time in nanoseconds since the recorder started; Time is the wall clock.
	Mono int64     `json:"mono"`
	Time time.Time `json:"time"`
	// Component is who made the hop: kubelet, apiserver, or a controller's name.
	Component string `json:"component"`
	Hop       Hop    `json:"hop"`
	// Object is what the hop is about: the written object, the event's object, or the queue key (as a
	// Ref of the controller's kind) for queue and reconcile hops.
	Object Ref `json:"object"`
	// OldResourceVersion is the version before, for an informer update.
	OldResourceVersion string `json:"oldResourceVersion,omitempty"`
	// From is the object an enqueue was mapped from (nil for a controller's own requeue).
	From *Ref `json:"from,omitempty"`
	// To is the key a map leads to.
	To *Ref `json:"to,omitempty"`
	// Outcome is the hop's result in one word (see the Hop constants).
	Outcome string `json:"outcome,omitempty"`
	// Detail is the rest, for people: a predicate's name, a miss's reason, a writer's identity, a call.
	Detail string `json:"detail,omitempty"`
	// Duration is a queue wait, a reconcile's length, a requeue delay or back-off, or a call's latency.
	Duration time.Duration `json:"duration,omitempty"`
	// Code is an HTTP status (API writes, dashboard calls).
	Code int `json:"code,omitempty"`
	// Error is the error a reconcile returned or a call failed with.
	Error string `json:"error,omitempty"`
	// Reconcile identifies the reconcile pass (from the dequeue to the end) a hop belongs to.
	Reconcile uint64 `json:"reconcile,omitempty"`
}

// DefaultSize is the number of events a Recorder keeps unless told otherwise (a few MiB).
const DefaultSize = 20000

// Recorder keeps the newest events in a ring. It is safe for concurrent use; a nil *Recorder records
// nothing.
type Recorder struct {
	start time.Time

	mu     sync.Mutex
	ring   []Event
	next   uint64 // seq of the next event
	subs   map[*Subscription]struct{}
	passes uint64               // reconcile passes numbered so far
	active map[activeKey]uint64 // reconcile in progress per controller and key
	kinds  map[string]string    // controller → the kind of its keys
	ctrls  map[string]ControllerInfo
	stats  map[string]func() chainhooks.QueueStats
}

type activeKey struct {
	controller string
	key        string
}

// New returns a Recorder that keeps the newest size events (DefaultSize if size <= 0).
func New(size int) *Recorder {
	if size <= 0 {
		size = DefaultSize
	}
	return &Recorder{
		start: time.Now(), ring: make([]Event, size), next: 1,
		subs: map[*Subscription]struct{}{}, active: map[activeKey]uint64{},
		kinds: map[string]string{}, ctrls: map[string]ControllerInfo{}, stats: map[string]func() chainhooks.QueueStats{},
	}
}

// Size is the ring's capacity.
func (r *Recorder) Size() int { return len(r.ring) }

// record stamps e and stores it, evicting the oldest event when the ring is full, and hands it to
// subscribers.
func (r *Recorder) record(e Event) {
	if r == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	e.Seq = r.next
	r.next++
	e.Mono = int64(now.Sub(r.start))
	e.Time = now
	r.ring[e.Seq%uint64(len(r.ring))] = e
	for s := range r.subs {
		select {
		case s.ch <- e:
		default:
			s.dropped++
		}
	}
	r.mu.Unlock()
}

// Filter selects events; zero fields match everything.
type Filter struct {
	// After keeps events with Seq > After.
	After uint64
	// Kind, Namespace and Name match the event's Object, From or To.
	Kind, Namespace, Name string
	// Component and Hop match exactly.
	Component string
	Hop       Hop
}

// Match reports whether e passes f.
func (f Filter) Match(e *Event) bool {
	if e.Seq <= f.After || (f.Component != "" && e.Component != f.Component) || (f.Hop != "" && e.Hop != f.Hop) {
		return false
	}
	if f.Kind == "" && f.Namespace == "" && f.Name == "" {
		return true
	}
	for _, ref := range []*Ref{&e.Object, e.From, e.To} {
		if ref != nil && (f.Kind == "" || eqFold(ref.Kind, f.Kind)) && (f.Namespace == "" || ref.Namespace == f.Namespace) &&
			(f.Name == "" || ref.Name == f.Name) {
			return true
		}
	}
	return false
}

// Events returns the kept events that pass f, oldest first.
func (r *Recorder) Events(f Filter) []Event {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	first := uint64(1)
	if n := uint64(len(r.ring)); r.next > n {
		first = r.next - n
	}
	out := []Event{}
	for seq := max(first, f.After+1); seq < r.next; seq++ {
		e := &r.ring[seq%uint64(len(r.ring))]
		if f.Match(e) {
			out = append(out, *e)
		}
	}
	return out
}

// Subscription receives events as they are recorded.
type Subscription struct {
	ch      chan Event
	dropped int
	r       *Recorder
}

// C delivers the events. A subscriber that falls more than its buffer behind loses events (see Dropped).
func (s *Subscription) C() <-chan Event { return s.ch }

// Dropped is how many events the subscription lost because its reader was slow.
func (s *Subscription) Dropped() int {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.dropped
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.r.mu.Lock()
	delete(s.r.subs, s)
	s.r.mu.Unlock()
}

// Subscribe returns a subscription to events recorded from now on, with room for buffer events.
func (r *Recorder) Subscribe(buffer int) *Subscription {
	s := &Subscription{ch: make(chan Event, max(buffer, 1)), r: r}
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	return s
}

func eqFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
