package ui

// chainview.go is the only file of this package that uses pkg/chain's Go API: it reads the recorder
// through the API server, keeps its events, and turns a trace into the page's own view model
// (ChainView). Everything else here, and the page's script, reads only that model.

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
	"github.com/rayctl/rayctl/pkg/chain/render"
)

// chainFeed follows the recorder's event stream and keeps the newest events.
type chainFeed struct {
	client *chainhttp.Client

	mu      sync.Mutex
	events  chain.Window
	changed chan struct{} // closed and replaced on every batch of new events
	err     error         // why the stream ended, for the page
}

// newChainFeed connects to the recorder as cfg does.
func newChainFeed(cfg *rest.Config) (*chainFeed, error) {
	c, err := chainhttp.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return &chainFeed{client: c, changed: make(chan struct{})}, nil
}

// diagnoseReader is what diagnose reads the recorder with.
func (f *chainFeed) diagnoseReader() chain.Source { return f.client }

// run lists the kept events, then follows new ones until ctx ends, reconnecting after an error.
func (f *chainFeed) run(ctx context.Context) {
	after := uint64(0)
	for ctx.Err() == nil {
		err := f.follow(ctx, &after)
		if ctx.Err() != nil {
			return
		}
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
		f.notify()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// follow reads the events after *after and then the stream, updating *after as events come.
func (f *chainFeed) follow(ctx context.Context, after *uint64) error {
	feed, err := chain.Tail(ctx, f.client, chain.Filter{After: *after}, 1024)
	if err != nil {
		return err
	}
	f.add(feed.List.Size, feed.List.Events)
	*after = max(*after, feed.List.Next-1)
	for {
		select {
		case e := <-feed.C:
			batch := feed.Batch(e)
			*after = batch[len(batch)-1].Seq
			f.add(feed.List.Size, batch)
		case err := <-feed.Err:
			return err
		}
	}
}

// add appends events, keeping at most twice the recorder's size, and wakes the watchers.
func (f *chainFeed) add(size int, events []chain.Event) {
	f.mu.Lock()
	f.err = nil
	f.events.Add(size, events...)
	f.mu.Unlock()
	f.notify()
}

func (f *chainFeed) notify() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// wait returns a channel closed at the next change.
func (f *chainFeed) wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// namespaceEvents are the kept events about namespace ns (a trace never leaves its namespace).
func (f *chainFeed) namespaceEvents(ns string) ([]chain.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []chain.Event
	events := f.events.Events()
	for i := range events {
		e := &events[i]
		if e.Object.Namespace == ns || (e.To != nil && e.To.Namespace == ns) || (e.From != nil && e.From.Namespace == ns) {
			out = append(out, *e)
		}
	}
	return out, f.err
}

// view is the chain of kind ns/name as the page draws it: the trace (chain.Trace), plus the hops of the
// same components about the same objects that went nowhere (a predicate's drop, a handler's miss, a
// failed Reconcile).
//
// also names objects of the same namespace whose traces join the view: a RayJob's RayCluster, whose
// chain (its Pods created, started, made ready) runs while the RayJob waits for it. external (no
// rayctl controller acts on kind: chain.External) draws the chain from the API server's side.
func (f *chainFeed) view(kind, ns, name string, external bool, also ...objectRef) *ChainView {
	events, err := f.namespaceEvents(ns)
	v := &ChainView{Kind: kind, Namespace: ns, Name: name}
	if err != nil {
		v.Error = err.Error()
	}
	var steps []chain.Step
	if !external {
		steps = chain.Trace(events, kind, ns, name)
	}
	if len(steps) == 0 {
		// No rayctl controller left hops for it (an operator outside rayctl): the chain as the API
		// server saw it.
		v.FromAPI = true
		steps = chain.APITrace(events, kind, ns, name)
		also = nil
	}
	for _, o := range also {
		have := map[uint64]bool{}
		for i := range steps {
			have[steps[i].Seq] = true
		}
		for _, s := range chain.Trace(events, o.kind, ns, o.name) {
			if !have[s.Seq] {
				steps = append(steps, s)
			}
		}
	}
	inTrace := map[uint64]bool{}
	objects := map[string]bool{refKey(kind, ns, name): true}
	components := map[string]bool{}
	for i := range steps {
		inTrace[steps[i].Seq] = true
		objects[refKey(steps[i].Object.Kind, steps[i].Object.Namespace, steps[i].Object.Name)] = true
		components[steps[i].Component] = true
	}
	// Only the components of the chain: every other controller that watches Pods misses a Ray Pod.
	var extra []chain.Step
	for i := range events {
		e := &events[i]
		if !inTrace[e.Seq] && components[e.Component] && objects[refKey(e.Object.Kind, e.Object.Namespace, e.Object.Name)] && wentNowhere(e) {
			extra = append(extra, chain.Step{Event: *e, At: e.Mono})
		}
	}
	if len(extra) > maxExtra {
		extra = extra[len(extra)-maxExtra:]
	}
	for i := range steps {
		h := hopView(&steps[i])
		if c := steps[i].Call; v.FromAPI && c != nil && c.User != "" && !strings.HasPrefix(c.User, "system:node:") && steps[i].Hop != chain.WatchDelivery {
			// The actor's lane, arrowing into the API server (or, proxied, to the dashboard).
			h.Lane = c.User
			if h.To == h.Lane || steps[i].Hop == chain.APIWrite {
				h.To = LaneAPIServer
			}
		}
		v.Hops = append(v.Hops, h)
	}
	for i := range extra {
		v.Hops = append(v.Hops, hopView(&extra[i]))
	}
	// The latency table follows the line of causes to the chain's end: a RayJob's accepted submission,
	// else the trace's last hop.
	anchor := uint64(0)
	for i := range steps {
		s := &steps[i]
		if s.IsCall("POST") && s.Error == "" && s.Call.Code > 0 && s.Call.Code < 300 {
			anchor = s.Seq
		}
	}
	if anchor == 0 && len(steps) > 0 {
		anchor = steps[len(steps)-1].Seq
	}
	for _, s := range chain.Path(steps, anchor) {
		v.Path = append(v.Path, s.Seq)
	}
	v.finish()
	return v
}

// maxExtra bounds the hops that went nowhere a view shows (a failing Reconcile repeats).
const maxExtra = 40

func refKey(kind, ns, name string) string { return strings.ToLower(kind) + "/" + ns + "/" + name }

// wentNowhere reports whether e is a hop that dropped its event: a predicate's drop, a handler's miss,
// a Reconcile that failed.
func wentNowhere(e *chain.Event) bool {
	return (e.Hop == chain.PredicateHop && e.Outcome == chain.Dropped) || e.Hop == chain.MapMiss ||
		(e.Hop == chain.ReconcileEnd && e.Outcome == chain.Failed)
}

// hopView turns one step into the page's hop: its lanes, label, times and whether it went wrong.
func hopView(s *chain.Step) HopView {
	e := &s.Event
	h := HopView{
		Seq: e.Seq, at: s.At, Lane: e.Component, To: e.Component, Hop: string(e.Hop),
		Kind: e.Object.Kind, Namespace: e.Object.Namespace, Name: e.Object.Name,
		RV: e.Object.ResourceVersion, OldRV: e.OldResourceVersion,
		Duration: ms(e.Duration), Cause: s.Cause, Error: e.Error, Unseen: s.Unseen,
		Detail: render.Describe(e),
	}
	if e.To != nil {
		h.Target = e.To.Kind + " " + e.To.Name
	}
	obj, outcome := e.Object.Kind+" "+e.Object.Name, string(e.Outcome)
	switch e.Hop {
	case chain.KubeletWrite:
		h.To = LaneAPIServer
		h.Label = "PATCH " + obj + " status " + render.PodSummary(e.Pod)
		h.Ready = e.Pod.IsReady()
	case chain.APIWrite:
		h.Label = "accepted " + outcome + " " + obj
		if e.Call != nil && e.Call.Code >= 300 {
			h.Label, h.Failed = "refused "+outcome+" "+obj, true
		}
	case chain.InformerEvent:
		h.Lane, h.To = LaneAPIServer, e.Component
		h.Label = "watch " + outcome + " " + obj
	case chain.WatchDelivery:
		// From the API server to the watcher's lane (a node's watch is the kubelet's).
		h.Lane, h.To = LaneAPIServer, "kubelet"
		if e.Call != nil && !strings.HasPrefix(e.Call.User, "system:node:") {
			h.To = e.Call.User
		}
		h.Label = "watch " + outcome + " " + obj + " → " + h.To
	case chain.PredicateHop:
		h.Label = "predicate " + outcome + " " + obj
		h.Dropped = e.Outcome == chain.Dropped
	case chain.MapHop:
		h.Label = "map " + obj + " → " + h.Target
	case chain.MapMiss:
		h.Label, h.Dropped = "not mapped: "+obj, true
	case chain.EnqueueHop:
		h.Label = "enqueue " + obj + " (" + outcome + ")"
	case chain.DequeueHop:
		h.Label = "queue wait " + obj
	case chain.ReconcileStart:
		h.Label = "Reconcile " + obj
	case chain.ReconcileEnd:
		h.Label = "Reconcile " + obj + " " + outcome
		if e.Outcome == chain.Failed {
			h.Failed = true
			// An error with a RequeueAfter: controller-runtime ignores the delay and backs off.
			h.Dropped = e.Result != nil && e.Result.RequeueAfterIgnored
		}
	case chain.StatusWrite:
		h.To = LaneAPIServer
		h.Label = "status write " + obj + " " + render.StatusSummary(e.Status)
	case chain.ObjectWrite:
		h.To = LaneAPIServer
		h.Label = outcome + " " + obj
	case chain.Transition:
		h.Label = obj + " " + outcome
		if e.Change != nil {
			h.Label = obj + " " + e.Change.From + " → " + e.Change.To
		}
	case chain.ProxyCall:
		h.To = LaneDashboard
		if e.Call != nil {
			h.Method, h.Path, h.Code = e.Call.Method, e.Call.Path, e.Call.Code
		}
		h.Label = "proxied " + h.Method + " " + h.Path
		if h.Code > 0 {
			h.Label += " → " + itoa(h.Code)
		}
		h.Failed = h.Code >= 400
	case chain.DashboardCall:
		h.To = LaneDashboard
		if e.Call != nil {
			h.Method, h.Path, h.Code = e.Call.Method, e.Call.Path, e.Call.Code
		}
		h.Label = h.Method + " " + h.Path
		if h.Code > 0 {
			h.Label += " → " + itoa(h.Code)
		}
		h.Failed = e.Error != "" || h.Code >= 400
	default:
		h.Label = string(e.Hop) + " " + obj
	}
	return h
}
