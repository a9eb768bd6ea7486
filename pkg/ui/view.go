package ui

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Lanes with fixed names: the API server and Ray's dashboard. Controllers' lanes are their names
// (raycluster, rayjob, …), the kubelet's is kubelet.
const (
	LaneKubelet   = "kubelet"
	LaneAPIServer = "apiserver"
	LaneDashboard = "dashboard"
)

// laneTitles names the lanes the page always knows, in the order they are drawn.
var laneTitles = []Lane{
	{ID: LaneKubelet, Title: "kubelet"},
	{ID: LaneAPIServer, Title: "API server"},
	{ID: "raycluster", Title: "RayCluster controller"},
	{ID: "rayjob", Title: "RayJob controller"},
	{ID: LaneDashboard, Title: "Ray dashboard"},
}

// objectRef names an object in the namespace of a view.
type objectRef struct{ kind, name string }

// Lane is one column of the sequence diagram: a component.
type Lane struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// HopView is one hop as the page draws it: an arrow from Lane to To (the same lane for a step
// inside one component), labelled and timed.
type HopView struct {
	Seq uint64 `json:"seq"`
	// At is the hop's offset from the first hop of the view, in milliseconds.
	At float64 `json:"at"`
	at int64
	// Lane is the component that made the hop; To the one the arrow points at.
	Lane string `json:"lane"`
	To   string `json:"to"`
	// Hop is the kind of hop (kubelet-write, api-write, informer, predicate, map, map-miss, enqueue,
	// dequeue, reconcile-start, reconcile-end, status-write, controller-write, transition,
	// dashboard-call).
	Hop string `json:"hop"`
	// Kind, Namespace, Name and RV name the object at its resourceVersion; OldRV is the version an
	// informer update came from; Target is what a map led to ("RayCluster x").
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	RV        string `json:"rv,omitempty"`
	OldRV     string `json:"oldRv,omitempty"`
	Target    string `json:"target,omitempty"`
	// Label is the arrow's text; Detail the hop in a sentence, for hovering.
	Label  string `json:"label"`
	Detail string `json:"detail"`
	// Latency is the time since the hop it followed from (ms; -1 when it has none in the view);
	// Duration the hop's own (a queue wait, a Reconcile, a call), in ms.
	Latency  float64 `json:"latency"`
	Duration float64 `json:"duration"`
	Cause    uint64  `json:"cause,omitempty"`
	// Dropped marks an event that went nowhere (a predicate's drop, a handler's miss, a RequeueAfter
	// ignored after an error); Failed a refused write, a failed Reconcile or call.
	Dropped bool   `json:"dropped,omitempty"`
	Failed  bool   `json:"failed,omitempty"`
	Error   string `json:"error,omitempty"`
	// Ready marks a kubelet write that made the Pod Ready.
	Ready bool `json:"ready,omitempty"`
	// Method, Path and Code describe a dashboard call.
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	Code   int    `json:"code,omitempty"`
	// OnPath marks the hops of the latency table's line of causes.
	OnPath bool `json:"onPath,omitempty"`
	// Unseen says what happened before the hop out of the API server's sight (an operator outside
	// rayctl: its cache, queue and reconcile), in a view drawn from the API server's side.
	Unseen string `json:"unseen,omitempty"`
}

// ChainView is the chain of one object as the page draws it.
type ChainView struct {
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Lanes     []Lane    `json:"lanes"`
	Hops      []HopView `json:"hops"`
	// Path is the line of causes to the chain's end (Seqs, root first), which Latency times.
	Path    []uint64      `json:"path,omitempty"`
	Latency *LatencyTable `json:"latency,omitempty"`
	// Error says why the recorder could not be read, if it could not.
	Error string `json:"error,omitempty"`
	// FromAPI marks a view drawn from the API server's side (chain.APITrace): no rayctl controller
	// acts on the object; each hop's Unseen says what its operator did out of sight.
	FromAPI bool `json:"fromApi,omitempty"`
}

// LatencyTable is the latency of each hop along the line of causes from its root (the head Pod's
// Ready write, for a RayJob) to the chain's end (the job's submission), as `rayctl demo` ends.
type LatencyTable struct {
	From  string       `json:"from"`
	To    string       `json:"to"`
	Rows  []LatencyRow `json:"rows"`
	Total float64      `json:"total"`
}

// LatencyRow is one hop of the table, latency and running total in ms.
type LatencyRow struct {
	Label     string  `json:"label"`
	Component string  `json:"component"`
	Latency   float64 `json:"latency"`
	Total     float64 `json:"total"`
	Root      bool    `json:"root,omitempty"`
}

// finish orders the hops in time, sets their offsets and latencies, the lanes they use, and the
// latency table.
func (v *ChainView) finish() {
	sort.SliceStable(v.Hops, func(a, b int) bool {
		if v.Hops[a].at != v.Hops[b].at {
			return v.Hops[a].at < v.Hops[b].at
		}
		return v.Hops[a].Seq < v.Hops[b].Seq
	})
	bySeq := map[uint64]*HopView{}
	var t0 int64
	for i := range v.Hops {
		h := &v.Hops[i]
		if i == 0 {
			t0 = h.at
		}
		h.At = ms(time.Duration(h.at - t0))
		bySeq[h.Seq] = h
	}
	for i := range v.Hops {
		h := &v.Hops[i]
		h.Latency = -1
		if c, ok := bySeq[h.Cause]; ok && h.Cause != 0 {
			h.Latency = ms(time.Duration(max(h.at-c.at, 0)))
		}
	}
	v.Lanes = lanesOf(v.Hops)
	var path []*HopView
	for _, seq := range v.Path {
		if h, ok := bySeq[seq]; ok {
			h.OnPath = true
			path = append(path, h)
		}
	}
	v.Latency = latencyTable(path)
}

// lanesOf are the lanes the hops use: the known ones in their order, then others as they appear.
func lanesOf(hops []HopView) []Lane {
	used := map[string]bool{}
	var order []string
	for _, h := range hops {
		for _, l := range []string{h.Lane, h.To} {
			if !used[l] {
				used[l] = true
				order = append(order, l)
			}
		}
	}
	var lanes []Lane
	known := map[string]bool{}
	for _, l := range laneTitles {
		known[l.ID] = true
		if used[l.ID] {
			lanes = append(lanes, l)
		}
	}
	for _, id := range order {
		if !known[id] {
			lanes = append(lanes, Lane{ID: id, Title: id + " controller"})
		}
	}
	return lanes
}

// latencyTable times the line of causes path (root first): each hop's latency since the one before
// and the running total. A handler's mapping folds into its enqueue and a dequeue into its Reconcile
// (they take no time of their own); a dashboard call is two rows, the request sent and its answer.
func latencyTable(path []*HopView) *LatencyTable {
	if len(path) < 2 {
		return nil
	}
	root := path[0]
	t := &LatencyTable{From: "the first hop", To: path[len(path)-1].Label}
	if root.Hop == "kubelet-write" {
		t.From = "Pod status write"
		if root.Ready {
			t.From = "head Pod Ready"
		}
	}
	if last := path[len(path)-1]; last.Hop == "dashboard-call" && last.Method == "POST" {
		t.To = "job submitted"
	}
	t.Rows = append(t.Rows, LatencyRow{Label: root.Label, Component: root.Lane, Root: true})
	prev := root.at
	add := func(label, component string, at int64) {
		t.Rows = append(t.Rows, LatencyRow{Label: label, Component: component,
			Latency: ms(time.Duration(max(at-prev, 0))), Total: ms(time.Duration(max(at-root.at, 0)))})
		prev = max(prev, at)
	}
	for i, h := range path[1:] {
		switch {
		case (h.Hop == "map" || h.Hop == "dequeue") && i+2 < len(path):
			continue
		case h.Hop == "reconcile-start":
			add("queue wait → "+h.Label, h.Lane, h.at)
		case h.Hop == "dashboard-call":
			sent := h.at - int64(h.Duration*float64(time.Millisecond))
			add(h.Method+" "+h.Path+" sent", h.Lane, sent)
			add(fmt.Sprintf("%s answered (%d)", h.Method, h.Code), LaneDashboard, h.at)
		default:
			add(h.Label, h.Lane, h.at)
		}
	}
	t.Total = t.Rows[len(t.Rows)-1].Total
	return t
}

// ms is d in milliseconds, to 0.1 ms.
func ms(d time.Duration) float64 {
	return float64(d.Round(100*time.Microsecond)) / float64(time.Millisecond)
}

func itoa(n int) string { return strconv.Itoa(n) }
