package chain

import (
	"sort"
	"strings"
)

// Step is one event of a trace, with the event that led to it.
type Step struct {
	Event
	// Cause is the Seq of the event this one followed from (0 for a root: a kubelet write, a user's
	// write, or an event whose cause is no longer in the ring).
	Cause uint64 `json:"cause,omitempty"`
	// Causes are all the events in the trace this one followed from, Cause first: a Reconcile's queue
	// entry may merge several adds (coalesced), each with its own chain.
	Causes []uint64 `json:"causes,omitempty"`
	// At is when the hop happened, in the recorder's monotonic nanoseconds. It is Mono except for a
	// write, which is recorded when its response arrives: a write is placed at the moment the API server
	// received it, so it reads before what it caused.
	At int64 `json:"at"`
	// Unseen says what happened between the cause and this hop out of the recorder's sight (an
	// operator outside rayctl: its cache, queue and reconcile), for traces drawn from the API server's
	// side (APITrace).
	Unseen string `json:"unseen,omitempty"`
}

// Limits of one trace, so a long-lived object's history stays readable.
const (
	// maxSteps bounds a trace's length.
	maxSteps = 500
	// maxRequeues is how many of a controller's own requeues a trace follows back in a row.
	maxRequeues = 2
)

// objKey identifies an object at a resourceVersion.
type objKey struct{ kind, ns, name, rv string }

func keyOf(r Ref) objKey {
	return objKey{strings.ToLower(r.Kind), r.Namespace, r.Name, r.ResourceVersion}
}

// ctrlObj is an object (at a version) as one controller saw it.
type ctrlObj struct {
	controller string
	obj        objKey
}

// index finds the events that link to one another.
type index struct {
	ev        []Event
	bySeq     map[uint64]int
	origins   map[objKey][]int // kubelet writes, controllers' status and object writes
	apiWrites map[objKey][]int
	informer  map[ctrlObj][]int
	seenBy    map[objKey][]int  // informer events of an object version, every controller's
	mappedTo  map[ctrlObj][]int // enqueues by controller and the object version they were mapped from
	filters   map[ctrlObj][]int // predicates, maps and misses, after the informer event
	enqueues  map[ctrlObj][]int // by controller and key (rv empty)
	dequeues  map[ctrlObj][]int
	ends      map[ctrlObj][]int
	passes    map[uint64][]int
}

func newIndex(events []Event) *index {
	x := &index{
		ev: events, bySeq: map[uint64]int{},
		origins: map[objKey][]int{}, apiWrites: map[objKey][]int{}, informer: map[ctrlObj][]int{},
		seenBy: map[objKey][]int{}, mappedTo: map[ctrlObj][]int{},
		filters: map[ctrlObj][]int{}, enqueues: map[ctrlObj][]int{}, dequeues: map[ctrlObj][]int{},
		ends: map[ctrlObj][]int{}, passes: map[uint64][]int{},
	}
	for i := range events {
		e := &events[i]
		x.bySeq[e.Seq] = i
		if e.Reconcile != 0 {
			x.passes[e.Reconcile] = append(x.passes[e.Reconcile], i)
		}
		k := keyOf(e.Object)
		qk := ctrlObj{e.Component, objKey{k.kind, k.ns, k.name, ""}}
		switch e.Hop {
		case KubeletWrite, StatusWrite, ObjectWrite:
			x.origins[k] = append(x.origins[k], i)
		case APIWrite:
			x.apiWrites[k] = append(x.apiWrites[k], i)
		case InformerEvent:
			x.informer[ctrlObj{e.Component, k}] = append(x.informer[ctrlObj{e.Component, k}], i)
			x.seenBy[k] = append(x.seenBy[k], i)
		case PredicateHop, MapHop, MapMiss:
			x.filters[ctrlObj{e.Component, k}] = append(x.filters[ctrlObj{e.Component, k}], i)
		case EnqueueHop:
			x.enqueues[qk] = append(x.enqueues[qk], i)
			if e.From != nil {
				from := ctrlObj{e.Component, keyOf(*e.From)}
				x.mappedTo[from] = append(x.mappedTo[from], i)
			}
		case DequeueHop:
			x.dequeues[qk] = append(x.dequeues[qk], i)
		case ReconcileEnd:
			x.ends[qk] = append(x.ends[qk], i)
		}
	}
	return x
}

// lastBefore is the last index in list (sorted) below i, or -1.
func lastBefore(list []int, i int) int {
	j := sort.SearchInts(list, i)
	if j == 0 {
		return -1
	}
	return list[j-1]
}

// firstAfter is the first index in list (sorted) above i, or -1.
func firstAfter(list []int, i int) int {
	j := sort.SearchInts(list, i+1)
	if j == len(list) {
		return -1
	}
	return list[j]
}

func queueKey(e *Event) ctrlObj {
	return ctrlObj{e.Component, objKey{strings.ToLower(e.Object.Kind), e.Object.Namespace, e.Object.Name, ""}}
}

// causes returns the events i followed from, the primary one first.
func (x *index) causes(i int) []int {
	e := &x.ev[i]
	k := keyOf(e.Object)
	switch e.Hop {
	case APIWrite:
		return x.origins[k]
	case InformerEvent:
		return x.apiWrites[k]
	case PredicateHop, MapHop, MapMiss:
		if j := lastBefore(x.informer[ctrlObj{e.Component, k}], i); j >= 0 {
			return []int{j}
		}
	case EnqueueHop:
		if e.From != nil {
			list := x.filters[ctrlObj{e.Component, keyOf(*e.From)}]
			for j := lastBefore(list, i); j >= 0; j = lastBefore(list, j) {
				if x.ev[j].Hop == MapHop {
					return []int{j}
				}
			}
			return nil
		}
		if j := lastBefore(x.ends[queueKey(e)], i); j >= 0 {
			return []int{j}
		}
	case DequeueHop:
		// Every add since the key was last taken led here; the primary cause is the latest add by a
		// handler (a change someone made), else the latest requeue.
		qk := queueKey(e)
		prev := lastBefore(x.dequeues[qk], i)
		var handler, requeue []int
		for _, j := range x.enqueues[qk] {
			if j > prev && j < i {
				if x.ev[j].From != nil {
					handler = append([]int{j}, handler...)
				} else {
					requeue = append([]int{j}, requeue...)
				}
			}
		}
		return append(handler, requeue...)
	case ReconcileStart:
		for _, j := range x.passes[e.Reconcile] {
			if x.ev[j].Hop == DequeueHop {
				return []int{j}
			}
		}
	case ReconcileEnd, StatusWrite, ObjectWrite, Transition, DashboardCall:
		for _, j := range x.passes[e.Reconcile] {
			if x.ev[j].Hop == ReconcileStart {
				return []int{j}
			}
		}
	}
	return nil
}

// effects returns the events that followed from i.
func (x *index) effects(i int) []int {
	e := &x.ev[i]
	k := keyOf(e.Object)
	switch e.Hop {
	case KubeletWrite, StatusWrite, ObjectWrite:
		return x.apiWrites[k]
	case APIWrite:
		return x.seenBy[k]
	case InformerEvent:
		list := x.filters[ctrlObj{e.Component, k}]
		var out []int
		for j := firstAfter(list, i); j >= 0; j = firstAfter(list, j) {
			if x.ev[j].Hop == PredicateHop && x.ev[j].Outcome == Passed {
				out = append(out, j)
				continue
			}
			out = append(out, j)
			break
		}
		// Enqueues that came of the event's mapping.
		for _, j := range x.mappedTo[ctrlObj{e.Component, k}] {
			if j > i {
				out = append(out, j)
			}
		}
		sort.Ints(out)
		return out
	case EnqueueHop:
		if j := firstAfter(x.dequeues[queueKey(e)], i); j >= 0 {
			return []int{j}
		}
	case DequeueHop:
		return x.passes[e.Reconcile]
	}
	return nil
}

// Trace returns the causal timeline of one object: the chain that led to its latest significant hop
// (for a RayJob its submission to the dashboard, else its latest state change or status write, else
// its latest reconcile), every cause of every hop on the way back (coalesced enqueues included), and
// for a Pod what its latest kubelet write went on to cause, after the chain that created it (the write
// that made its controller create it: a user's, or an autoscaler's). A RayService's trace also holds the
// chain to its latest Serve deploy and to its latest HTTPRoute write, with what that write caused. kind
// matches case-insensitively.
func Trace(events []Event, kind, namespace, name string) []Step {
	x := newIndex(events)
	anchor := x.anchor(kind, namespace, name)
	if anchor < 0 {
		return nil
	}
	set := map[int]bool{}
	x.back(anchor, set, 0)
	if eqFold(kind, KindRayService) {
		// A RayService's latest state change usually comes passes after its Serve config went to the
		// dashboard; the chain that led to that deploy is part of its story.
		if put := x.lastCall(kind, namespace, name, "PUT"); put >= 0 && !set[put] {
			x.back(put, set, 0)
		}
		// An incremental upgrade moves traffic by writing the RayService's HTTPRoute: the chain to its
		// latest route write, and what that write went on to cause (the Gateway controller programming
		// its proxy), are part of it too.
		if w := x.lastWriteIn(kind, namespace, name, KindHTTPRoute); w >= 0 {
			x.back(w, set, 0)
			x.forward(w, set)
		}
	}
	if x.ev[anchor].Hop == KubeletWrite {
		x.forward(anchor, set)
		if c := x.creation(kind, namespace, name); c >= 0 {
			x.back(c, set, 0)
			for _, j := range x.effects(c) {
				set[j] = true
			}
		}
	}
	return x.steps(set)
}

// lastCall is the object's latest dashboard call with the HTTP method, or -1.
func (x *index) lastCall(kind, ns, name, method string) int {
	for i := len(x.ev) - 1; i >= 0; i-- {
		e := &x.ev[i]
		if e.IsCall(method) && eqFold(e.Object.Kind, kind) && e.Object.Namespace == ns && e.Object.Name == name {
			return i
		}
	}
	return -1
}

// lastWriteIn is the latest write of an object of kind written by a reconcile of the object (kind,
// ns, name), or -1.
func (x *index) lastWriteIn(kind, ns, name, written string) int {
	for i := len(x.ev) - 1; i >= 0; i-- {
		e := &x.ev[i]
		if e.Hop != ObjectWrite || !eqFold(e.Object.Kind, written) || e.Reconcile == 0 {
			continue
		}
		for _, j := range x.passes[e.Reconcile] {
			if s := &x.ev[j]; s.Hop == ReconcileStart {
				if eqFold(s.Object.Kind, kind) && s.Object.Namespace == ns && s.Object.Name == name {
					return i
				}
				break
			}
		}
	}
	return -1
}

// creation is the controller's write that created the object, or -1.
func (x *index) creation(kind, ns, name string) int {
	for i := range x.ev {
		e := &x.ev[i]
		if e.Hop == ObjectWrite && e.Outcome == Create && eqFold(e.Object.Kind, kind) && e.Object.Namespace == ns && e.Object.Name == name {
			return i
		}
	}
	return -1
}

// anchor picks the hop a trace of the object ends (or, for a Pod, starts) at.
func (x *index) anchor(kind, ns, name string) int {
	match := func(e *Event) bool {
		return eqFold(e.Object.Kind, kind) && e.Object.Namespace == ns && e.Object.Name == name
	}
	last := func(ok func(e *Event) bool) int {
		for i := len(x.ev) - 1; i >= 0; i-- {
			if e := &x.ev[i]; match(e) && ok(e) {
				return i
			}
		}
		return -1
	}
	for _, ok := range []func(e *Event) bool{
		func(e *Event) bool { return e.IsCall("POST") },
		func(e *Event) bool { return e.Hop == KubeletWrite || e.Hop == Transition },
		func(e *Event) bool { return e.Hop == StatusWrite },
		func(e *Event) bool { return e.Hop == ReconcileEnd },
		func(e *Event) bool { return true },
	} {
		if i := last(ok); i >= 0 {
			return i
		}
	}
	return -1
}

// back adds i and everything it followed from to set.
func (x *index) back(i int, set map[int]bool, requeues int) {
	if set[i] || len(set) >= maxSteps {
		return
	}
	set[i] = true
	e := &x.ev[i]
	if e.Reconcile != 0 {
		for _, j := range x.passes[e.Reconcile] {
			if !set[j] {
				x.back(j, set, requeues)
			}
		}
	}
	causes := x.causes(i)
	if e.Hop == DequeueHop && len(causes) > 0 && x.ev[causes[0]].From != nil {
		// A change was queued: the controller's own requeues merged into it are kept, but not
		// followed further back.
		for _, j := range causes {
			if x.ev[j].From == nil {
				set[j] = true
			} else {
				x.back(j, set, requeues)
			}
		}
		return
	}
	for _, j := range causes {
		r := requeues
		if e.Hop == EnqueueHop && e.From == nil {
			if r++; r > maxRequeues {
				continue
			}
		}
		x.back(j, set, r)
	}
}

// forward adds everything i caused to set.
func (x *index) forward(i int, set map[int]bool) {
	for _, j := range x.effects(i) {
		if set[j] || len(set) >= maxSteps {
			continue
		}
		set[j] = true
		x.forward(j, set)
	}
}

// steps orders the events of set in time, with their primary causes.
func (x *index) steps(set map[int]bool) []Step {
	out := make([]Step, 0, len(set))
	at := map[int]int64{}
	for i := range set {
		at[i] = x.ev[i].Mono
	}
	// A write is recorded when its answer arrives; place it where the API server received it.
	for i := range set {
		e := &x.ev[i]
		if e.Hop != APIWrite {
			continue
		}
		received := e.Mono - int64(e.Duration)
		for _, j := range x.causes(i) {
			if set[j] && at[j] > received {
				at[j] = received
			}
		}
		for _, j := range x.seenBy[keyOf(e.Object)] {
			if set[j] && at[j] <= at[i] {
				at[i] = max(at[j]-1, received)
			}
		}
	}
	for i := range set {
		s := Step{Event: x.ev[i], At: at[i]}
		for _, j := range x.causes(i) {
			if set[j] {
				if s.Cause == 0 {
					s.Cause = x.ev[j].Seq
				}
				s.Causes = append(s.Causes, x.ev[j].Seq)
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].At != out[b].At {
			return out[a].At < out[b].At
		}
		return out[a].Seq < out[b].Seq
	})
	return out
}
