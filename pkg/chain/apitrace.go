package chain

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// APITrace returns the chain of one object drawn from the API server's side, for an operator outside
// rayctl whose cache, queue and reconciles the recorder cannot see: the kubelet's writes of the Pods,
// every client's writes of the object and of the objects named after it (a RayJob's RayCluster, its
// Pods and Services, its submitter Job and that Job's Pod all start with its name), the requests the
// API server proxied to them (the operator's calls to Ray's dashboard), in time order. A write is kept
// when it creates or deletes, when the status it wrote differs from the object's previous one, or
// when the API server refused it (but for conflicts); a proxied GET the first and last time its path
// was asked. Each step follows from the one before it. Where the actor changes, the watch event that
// carried the hop before to the next actor (WatchDelivery: the object at that resourceVersion,
// delivered to a watch of its user, or of a node for the kubelet) is the step between them when the
// API server delivered one; for an actor whose work happens out of sight, Unseen says so — naming,
// when no delivery was recorded, its watch of the kind of the hop before when the API server saw that
// watch open.
func APITrace(events []Event, kind, namespace, name string) []Step {
	related := func(r *Ref) bool {
		return r.Namespace == namespace && (r.Name == name || strings.HasPrefix(r.Name, name+"-"))
	}
	kubeletRV := map[objKey]bool{}
	for i := range events {
		if e := &events[i]; e.Hop == KubeletWrite {
			kubeletRV[keyOf(e.Object)] = true
		}
	}
	// Last per path of proxied GETs, to keep the last one.
	lastGet := map[string]int{}
	for i := range events {
		e := &events[i]
		if e.Hop == ProxyCall && e.Call != nil && e.Call.Method == "GET" && related(&e.Object) {
			lastGet[e.Object.Name+e.Call.Path] = i
		}
	}
	type objState struct {
		ready, status string
		firstUpdate   map[string]bool
	}
	states := map[string]*objState{}
	state := func(r *Ref) *objState {
		k := strings.ToLower(r.Kind) + "/" + r.Name
		if states[k] == nil {
			states[k] = &objState{firstUpdate: map[string]bool{}}
		}
		return states[k]
	}
	seenGet := map[string]bool{}
	var kept []int
	for i := range events {
		e := &events[i]
		if !related(&e.Object) {
			continue
		}
		switch e.Hop {
		case KubeletWrite:
			st := state(&e.Object)
			now := ""
			if e.Pod != nil {
				now = e.Pod.Phase + "/" + e.Pod.Ready
			}
			if now != st.ready {
				st.ready = now
				kept = append(kept, i)
			}
		case APIWrite:
			if e.Call == nil || kubeletRV[keyOf(e.Object)] {
				continue
			}
			st := state(&e.Object)
			switch {
			case e.Call.Code >= 300:
				if e.ErrorReason != "Conflict" {
					kept = append(kept, i)
				}
			case e.Call.Verb == "create" || e.Call.Verb == "delete":
				kept = append(kept, i)
			case len(e.Status) > 0:
				s := fmt.Sprint(e.Status)
				if s != st.status {
					st.status = s
					kept = append(kept, i)
				}
			default:
				k := e.Call.User + " " + e.Call.Subresource
				if !st.firstUpdate[k] {
					st.firstUpdate[k] = true
					kept = append(kept, i)
				}
			}
		case ProxyCall:
			if e.Call == nil {
				continue
			}
			path := e.Object.Name + e.Call.Path
			if e.Call.Method != "GET" || !seenGet[path] || lastGet[path] == i {
				seenGet[path] = true
				kept = append(kept, i)
			}
		}
	}
	// When the API server received each kubelet write: the kubelet records its write once the answer
	// is back, after the watch events it caused may have gone out.
	received := map[objKey]int64{}
	for i := range events {
		if e := &events[i]; e.Hop == APIWrite && kubeletRV[keyOf(e.Object)] {
			received[keyOf(e.Object)] = e.Mono - int64(e.Duration)
		}
	}
	steps := make([]Step, 0, len(kept))
	for _, i := range kept {
		e := events[i]
		at := e.Mono
		if e.Hop == APIWrite || e.Hop == ProxyCall {
			at -= int64(e.Duration)
		}
		if r, ok := received[keyOf(e.Object)]; ok && e.Hop == KubeletWrite && r < at {
			at = r
		}
		steps = append(steps, Step{Event: e, At: at})
	}
	sort.SliceStable(steps, func(a, b int) bool { return steps[a].At < steps[b].At })
	deliveries := map[objKey][]int{}
	for i := range events {
		if e := &events[i]; e.Hop == WatchDelivery && e.Call != nil {
			deliveries[keyOf(e.Object)] = append(deliveries[keyOf(e.Object)], i)
		}
	}
	out := make([]Step, 0, len(steps))
	for i := range steps {
		s := steps[i]
		if i == 0 {
			out = append(out, s)
			continue
		}
		prev := &out[len(out)-1]
		s.Cause, s.Causes = prev.Seq, []uint64{prev.Seq}
		who, before := actor(&s.Event), actor(&prev.Event)
		if who == before {
			out = append(out, s)
			continue
		}
		// The watch event that carried a hop (the one before, else one of the few before it, not its
		// own) to whoever acts next, when the API server delivered one to it before it acted.
		var d *Event
		from := prev
		for k := len(out) - 1; k >= max(0, len(out)-deliveryLookback) && d == nil; k-- {
			// Not a delivery, nor a hop of the next actor's own (its write's echo).
			if out[k].Hop != WatchDelivery && actor(&out[k].Event) != who {
				from = &out[k]
				d = delivery(events, deliveries[keyOf(from.Object)], who, from.At, s.At)
			}
		}
		if d != nil {
			out = append(out, Step{Event: *d, At: d.Mono, Cause: from.Seq, Causes: []uint64{from.Seq}})
			s.Cause, s.Causes = d.Seq, []uint64{d.Seq}
			if who != "kubelet" {
				s.Unseen = fmt.Sprintf("%s: its cache, queue and reconcile happen inside its process, out of the API server's sight", who)
			}
		} else if who != "kubelet" {
			s.Unseen = fmt.Sprintf("%s: the watch event's delivery, its cache, queue and reconcile happen inside its process, out of the API server's sight", who)
			if w := openWatch(events, who, prev.Object.Kind, prev.Object.Namespace, prev.Seq); w != nil {
				s.Unseen += fmt.Sprintf(" (it watches %ss %s since %s)", w.Object.Kind, scope(w.Object.Namespace), w.Time.Format(time.TimeOnly))
			}
		}
		out = append(out, s)
	}
	// A delivery of an earlier hop goes where it happened.
	sort.SliceStable(out, func(a, b int) bool { return out[a].At < out[b].At })
	return out
}

// deliveryLookback is how many hops back APITrace looks for the one whose watch event reached the
// next actor.
const deliveryLookback = 6

// delivery is the first of the deliveries (indices into events) made to who's watch (a node's for
// the kubelet) from the time from to the time to, nil if none.
func delivery(events []Event, deliveries []int, who string, from, to int64) *Event {
	for _, i := range deliveries {
		e := &events[i]
		if e.Mono < from || e.Mono > to {
			continue
		}
		if e.Call.User == who || (who == "kubelet" && strings.HasPrefix(e.Call.User, "system:node:")) {
			return e
		}
	}
	return nil
}

// actor is who made a hop: the kubelet, or the user of a write or proxied call.
func actor(e *Event) string {
	if e.Hop == KubeletWrite || e.Call == nil || strings.HasPrefix(e.Call.User, "system:node:") {
		return "kubelet"
	}
	return e.Call.User
}

// openWatch is the latest watch of kind that user opened before seq covering namespace, nil if none.
func openWatch(events []Event, user, kind, namespace string, seq uint64) *Event {
	var w *Event
	for i := range events {
		e := &events[i]
		if e.Seq >= seq {
			break
		}
		if e.Hop == APIRead && e.Outcome == Watch && e.Call != nil && e.Call.User == user && strings.EqualFold(e.Object.Kind, kind) &&
			(e.Object.Namespace == "" || e.Object.Namespace == namespace) {
			w = e
		}
	}
	return w
}

// scope is "in all namespaces" or "in namespace ns".
func scope(ns string) string {
	if ns == "" {
		return "in all namespaces"
	}
	return "in namespace " + ns
}
