package chain

import (
	"sort"
	"sync"
	"time"
)

// DefaultSize is the number of events a Recorder keeps unless told otherwise (a few MiB).
const DefaultSize = 20000

// Recorder keeps the newest events in a ring. It is safe for concurrent use; a nil *Recorder records
// nothing.
type Recorder struct {
	start time.Time

	mu sync.Mutex
	// ring holds the event of Seq s at (s-1) % size; it grows as events come, up to size (an idle
	// instance keeps few events, and a full ring preallocated would hold ~5 MB from the start).
	ring  []Event
	size  int
	next  uint64 // seq of the next event
	subs  map[*Subscription]struct{}
	ctrls map[string]ControllerInfo
	stats map[string]func() QueueStats
}

var _ Sink = (*Recorder)(nil)

// New returns a Recorder that keeps the newest size events (DefaultSize if size <= 0).
func New(size int) *Recorder {
	if size <= 0 {
		size = DefaultSize
	}
	return &Recorder{
		start: time.Now(), size: size, next: 1,
		subs: map[*Subscription]struct{}{}, ctrls: map[string]ControllerInfo{}, stats: map[string]func() QueueStats{},
	}
}

// Size is the ring's capacity.
func (r *Recorder) Size() int { return r.size }

// Next is the Seq the next event will get.
func (r *Recorder) Next() uint64 {
	if r == nil {
		return 1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// Record stamps e (Seq, Mono, Time) and stores it, evicting the oldest event when the ring is full,
// and hands it to subscribers. A nil *Recorder records nothing.
func (r *Recorder) Record(e Event) {
	if r == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	e.Seq = r.next
	r.next++
	e.Mono = int64(now.Sub(r.start))
	e.Time = now
	if len(r.ring) < r.size {
		if len(r.ring) == cap(r.ring) {
			grown := make([]Event, len(r.ring), min(r.size, max(2*cap(r.ring), 256)))
			copy(grown, r.ring)
			r.ring = grown
		}
		r.ring = append(r.ring, e)
	} else {
		r.ring[(e.Seq-1)%uint64(r.size)] = e
	}
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
	if n := uint64(r.size); r.next > n {
		first = r.next - n
	}
	out := []Event{}
	for seq := max(first, f.After+1); seq < r.next; seq++ {
		e := &r.ring[(seq-1)%uint64(r.size)]
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

// ControllerInfo describes how one controller is set up, for `rayctl diagnose`.
type ControllerInfo struct {
	// Name is the controller's name; Kind the kind of its keys (its For type).
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Manager is the manager the controller runs in; Identity the user it acts as.
	Manager  string `json:"manager"`
	Identity string `json:"identity"`
	// WatchNamespaces are the namespaces its cache holds (empty: all).
	WatchNamespaces []string `json:"watchNamespaces,omitempty"`
	// LabelSelectors are the cache's label selectors by kind ("Pod": "ray.io/node-type in (head,worker)").
	LabelSelectors map[string]string `json:"labelSelectors,omitempty"`
	// Watches are the kinds it watches, with how events map to keys and the predicates they pass.
	Watches []WatchInfo `json:"watches"`
	// Queue is the work queue's state when the info was read.
	Queue QueueStats `json:"queue"`
}

// WatchInfo describes one watch of a controller, for tools that explain why an event was or was not
// enqueued.
type WatchInfo struct {
	// Kind is the watched kind.
	Kind string `json:"kind"`
	// Handler is "object" (the builder's For) or "controller owner" (Owns), or a mapping's reason.
	Handler string `json:"handler"`
	// Predicates name the predicates an event must pass, in order.
	Predicates []string `json:"predicates,omitempty"`
}

// QueueStats is a snapshot of a controller's work queue.
type QueueStats struct {
	// Depth is the number of keys waiting (ready or delayed).
	Depth int `json:"depth"`
	// Busy is the number of keys a worker holds now; Concurrency is how many workers there are.
	Busy        int `json:"busy"`
	Concurrency int `json:"concurrency"`
}

// Register tells the recorder about a controller (what diagnose shows), and where its queue
// statistics come from (nil for none).
func (r *Recorder) Register(info ControllerInfo, stats func() QueueStats) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctrls[info.Name] = info
	if stats != nil {
		r.stats[info.Name] = stats
	}
}

// Controllers returns the registered controllers with their queues' current state, by name.
func (r *Recorder) Controllers() []ControllerInfo {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	out := make([]ControllerInfo, 0, len(r.ctrls))
	stats := map[string]func() QueueStats{}
	for name, c := range r.ctrls {
		out = append(out, c)
		stats[name] = r.stats[name]
	}
	r.mu.Unlock()
	for i := range out {
		if f := stats[out[i].Name]; f != nil {
			out[i].Queue = f()
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
