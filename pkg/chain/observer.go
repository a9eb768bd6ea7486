package chain

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
)

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
	Queue chainhooks.QueueStats `json:"queue"`
}

// WatchInfo is one watch of a controller: its kind, handler and predicates.
type WatchInfo = chainhooks.Watch

// Register tells the recorder about a controller (its key kind for queue hops, and what diagnose
// shows), and where its queue statistics come from (nil for none).
func (r *Recorder) Register(info ControllerInfo, stats func() chainhooks.QueueStats) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[info.Name] = info.Kind
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
	stats := map[string]func() chainhooks.QueueStats{}
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

// keyRef is the Ref of a controller's queue key.
func (r *Recorder) keyRef(controller string, key types.NamespacedName) Ref {
	r.mu.Lock()
	kind := r.kinds[controller]
	r.mu.Unlock()
	return Ref{Kind: kind, Namespace: key.Namespace, Name: key.Name}
}

// reconcileOf is the reconcile in progress for key, 0 if none.
func (r *Recorder) reconcileOf(controller string, key types.NamespacedName) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[activeKey{controller, key.String()}]
}

// Observer returns the recorder as a chainhooks.Observer (Nop for a nil recorder).
func (r *Recorder) Observer() chainhooks.Observer {
	if r == nil {
		return chainhooks.Nop{}
	}
	return observer{r}
}

type observer struct{ r *Recorder }

func (o observer) OnEvent(c string, obj Ref, oldRV string, t chainhooks.EventType) {
	o.r.record(Event{Component: c, Hop: InformerEvent, Object: obj, OldResourceVersion: oldRV, Outcome: string(t)})
}

func (o observer) OnPredicate(c string, obj Ref, predicate string, passed bool) {
	outcome := "passed"
	if !passed {
		outcome = "dropped"
	}
	o.r.record(Event{Component: c, Hop: PredicateHop, Object: obj, Outcome: outcome, Detail: predicate})
}

func (o observer) OnMap(c string, from Ref, to types.NamespacedName, reason string) {
	key := o.r.keyRef(c, to)
	o.r.record(Event{Component: c, Hop: MapHop, Object: from, To: &key, Detail: reason})
}

func (o observer) OnMapMiss(c string, from Ref, reason string) {
	o.r.record(Event{Component: c, Hop: MapMiss, Object: from, Detail: reason})
}

func (o observer) OnEnqueue(c string, e chainhooks.Enqueue) {
	o.r.record(Event{Component: c, Hop: EnqueueHop, Object: o.r.keyRef(c, e.Key), From: e.From, Outcome: string(e.Kind), Duration: e.After})
}

// OnDequeue opens a reconcile pass: the hops until the reconcile ends carry its number.
func (o observer) OnDequeue(c string, key types.NamespacedName, wait time.Duration) {
	r := o.r
	r.mu.Lock()
	r.passes++
	id := r.passes
	r.active[activeKey{c, key.String()}] = id
	r.mu.Unlock()
	r.record(Event{Component: c, Hop: DequeueHop, Object: r.keyRef(c, key), Duration: wait, Reconcile: id})
}

func (o observer) OnReconcileStart(c string, key types.NamespacedName) {
	o.r.record(Event{Component: c, Hop: ReconcileStart, Object: o.r.keyRef(c, key), Reconcile: o.r.reconcileOf(c, key)})
}

func (o observer) OnReconcileEnd(c string, key types.NamespacedName, res reconcile.Result, err error, took time.Duration) {
	r := o.r
	e := Event{Component: c, Hop: ReconcileEnd, Object: r.keyRef(c, key), Duration: took, Reconcile: r.reconcileOf(c, key)}
	switch {
	case err != nil:
		e.Outcome, e.Error = "error", err.Error()
		if res.RequeueAfter > 0 {
			e.Detail = fmt.Sprintf("RequeueAfter %s ignored: an error goes to the rate limiter", res.RequeueAfter)
		}
	case res.RequeueAfter > 0:
		e.Outcome, e.Detail = "requeue-after", res.RequeueAfter.String()
	case res.Requeue: //nolint:staticcheck // reported as the controller treats it
		e.Outcome = "requeue"
	default:
		e.Outcome = "done"
	}
	r.record(e)
	r.mu.Lock()
	delete(r.active, activeKey{c, key.String()})
	r.mu.Unlock()
}

func (o observer) OnStatusWrite(c string, key types.NamespacedName, obj Ref, summary string) {
	o.r.record(Event{Component: c, Hop: StatusWrite, Object: obj, Detail: summary, Reconcile: o.r.reconcileOf(c, key)})
}

func (o observer) OnWrite(c string, key types.NamespacedName, obj Ref, verb string) {
	o.r.record(Event{Component: c, Hop: ObjectWrite, Object: obj, Outcome: verb, Reconcile: o.r.reconcileOf(c, key)})
}

func (o observer) OnTransition(c string, key types.NamespacedName, obj Ref, from, to string) {
	o.r.record(Event{Component: c, Hop: Transition, Object: obj, Outcome: to, Detail: from + " → " + to, Reconcile: o.r.reconcileOf(c, key)})
}

func (o observer) OnCall(c string, key types.NamespacedName, call chainhooks.Call) {
	o.r.record(Event{Component: c, Hop: DashboardCall, Object: o.r.keyRef(c, key), Detail: call.Method + " " + call.URL,
		Code: call.Code, Error: call.Err, Duration: call.Took, Reconcile: o.r.reconcileOf(c, key)})
}
