// Package chain is the vocabulary of rayctl's trigger chain, one Event per hop: the kubelet's Pod status
// write, the API server accepting a write, each controller's informer event, predicate decision,
// handler mapping, enqueue, dequeue, reconcile, status write, state transition and dashboard call.
// Events link by (object, resourceVersion), so Trace can walk from a RayJob's submission back to the
// kubelet write that made its head Pod ready.
//
// Like controller-runtime's pkg/event it is a leaf: it depends on the standard library only, and every
// component that emits hops imports it (never the reverse). Each emits at its own seam into a Sink:
// the kubelet's status write hook (pkg/kubelet/status.ChainHook), the API server's audit backend
// (pkg/apiserver/chainaudit), the controllers' hooks (pkg/controllers/chainhooks). The Recorder is the
// Sink rayctl up uses: a ring of the newest events, with filters and subscriptions. Readers query and
// follow it through Source (the Recorder in-process, chainhttp.Client over the API server); the HTTP
// endpoint is in chainhttp, text rendering in render.
package chain

import (
	"fmt"
	"time"
)

// Hop is the kind of step an Event records.
type Hop string

// The hops of the chain, in the order a change travels them.
const (
	// KubeletWrite: the kubelet wrote a Pod's status (Object carries the resourceVersion it got back,
	// Pod what it wrote, Outcome the phase).
	KubeletWrite Hop = "kubelet-write"
	// APIWrite: the API server accepted (or refused) a write; Call has its verb, subresource, user and
	// code, Outcome the verb and subresource in words ("patch status").
	APIWrite Hop = "api-write"
	// InformerEvent: a controller's cache delivered a watch event (Outcome create/update/delete).
	InformerEvent Hop = "informer"
	// PredicateHop: the predicate named Predicate passed (Outcome "passed") or dropped ("dropped") an event.
	PredicateHop Hop = "predicate"
	// MapHop: a handler mapped an event's Object to the key To, for Reason.
	MapHop Hop = "map"
	// MapMiss: a handler mapped an event to no key; Reason says why.
	MapMiss Hop = "map-miss"
	// EnqueueHop: a key entered the work queue; Outcome says how (EnqueueNew, EnqueueCoalesced …).
	EnqueueHop Hop = "enqueue"
	// DequeueHop: a worker took a key; Duration is how long it had been ready.
	DequeueHop Hop = "dequeue"
	// ReconcileStart and ReconcileEnd bracket one Reconcile; the end's Outcome is done, requeue,
	// requeue-after or error, and Result says what Reconcile asked for.
	ReconcileStart Hop = "reconcile-start"
	ReconcileEnd   Hop = "reconcile-end"
	// StatusWrite: a controller wrote an object's status (Object carries the new resourceVersion, Status
	// a few fields of what was written).
	StatusWrite Hop = "status-write"
	// ObjectWrite: a controller created, updated or deleted an object (a Pod it scaled, a route's weights)
	// during a Reconcile;
	// Outcome is the verb, Object carries the resourceVersion the API server returned.
	ObjectWrite Hop = "controller-write"
	// Transition: an object's state changed (a RayJob's jobDeploymentStatus); Change has from and to,
	// Outcome is the new state.
	Transition Hop = "transition"
	// DashboardCall: a controller called Ray's dashboard; Call has the method, URL and code.
	DashboardCall Hop = "dashboard-call"
	// APIRead: the API server answered a list or opened a watch (Call.Verb) of a followed resource for
	// Call.User (with Call.UserAgent); Object has the kind and the namespace asked for ("" for all of
	// them). It is how an operator outside rayctl shows what its cache holds.
	APIRead Hop = "api-read"
	// ProxyCall: the API server proxied a request to a Service or Pod (services/proxy, pods/proxy) for
	// Call.User; Call has the method, path and code, Object the Service or Pod. An operator run with
	// --use-kubernetes-proxy reaches Ray's dashboard this way.
	ProxyCall Hop = "api-proxy"
	// WatchDelivery: the API server delivered a watch event of Object (at its resourceVersion; Outcome
	// create/update/delete) to one client's watch: Call has the watcher's User and UserAgent. It is the
	// last hop of a write the API server sees before an operator outside rayctl acts on it.
	WatchDelivery Hop = "api-deliver"
)

// Outcome is an Event's result in one word or two. The hops with a fixed set of results use the
// constants below; the others carry what they saw: a KubeletWrite the Pod's phase ("Running"), an
// APIWrite the verb and subresource ("patch status"), a Transition the new state, a ProxyCall the
// HTTP method.
type Outcome string

// The Outcomes of an InformerEvent (the watch event's type, as controller-runtime's event package
// names them, and of a WatchDelivery), of an ObjectWrite (create, update, delete) and of an APIRead (list,
// watch).
const (
	Create  Outcome = "create"
	Update  Outcome = "update"
	Delete  Outcome = "delete"
	Generic Outcome = "generic"
	List    Outcome = "list"
	Watch   Outcome = "watch"
)

// The Outcomes of a PredicateHop and a ReconcileEnd.
const (
	Passed       Outcome = "passed"
	Dropped      Outcome = "dropped"
	Done         Outcome = "done"
	Requeue      Outcome = "requeue"
	RequeueAfter Outcome = "requeue-after"
	Failed       Outcome = "error"
)

// The Outcomes of an EnqueueHop: what an add did to a work queue.
const (
	// EnqueueNew: the key was not waiting; it is now.
	EnqueueNew Outcome = "new"
	// EnqueueCoalesced: the key was already waiting to be processed; this add merges into that one.
	EnqueueCoalesced Outcome = "coalesced"
	// EnqueueAdvanced: the key was waiting for a later time (a RequeueAfter, a back-off); this add
	// makes it ready now.
	EnqueueAdvanced Outcome = "advanced"
	// EnqueueRequeueAfter: the controller put the key back for later because Reconcile asked to
	// (Result.RequeueAfter).
	EnqueueRequeueAfter Outcome = "requeue-after"
	// EnqueueRateLimited: the controller put the key back after an error (or Result.Requeue), delayed
	// by the rate limiter's back-off.
	EnqueueRateLimited Outcome = "rate-limited"
	// EnqueueDelayed: a handler asked for the key to be processed after a delay.
	EnqueueDelayed Outcome = "delayed"
)

// Ref names one object at one resourceVersion; it is how the hops of a chain link up.
type Ref struct {
	// Kind is the object's kind ("Pod", "RayCluster").
	Kind string `json:"kind"`
	// Namespace and Name identify the object; UID tells a recreated object from its predecessor.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	// ResourceVersion is the version the hop saw.
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Event is one hop. The fields after Outcome are typed details; each is set only for the hops its
// comment names.
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
	// Outcome is the hop's result in one word (see the Hop constants and Outcome).
	Outcome Outcome `json:"outcome,omitempty"`

	// Call is the request of an APIWrite, APIRead, ProxyCall or DashboardCall, or the watch of a
	// WatchDelivery.
	Call *Call `json:"call,omitempty"`
	// Pod is what a KubeletWrite wrote.
	Pod *PodStatus `json:"pod,omitempty"`
	// Result is what a ReconcileEnd's Reconcile returned.
	Result *Result `json:"result,omitempty"`
	// Predicate names a PredicateHop's predicate.
	Predicate string `json:"predicate,omitempty"`
	// Reason is why a MapHop mapped ("controller owner") or a MapMiss did not.
	Reason string `json:"reason,omitempty"`
	// Change is a Transition's from and to.
	Change *Change `json:"change,omitempty"`
	// Status is a StatusWrite's summary: a few fields of the status written, in order.
	Status []Field `json:"status,omitempty"`

	// Duration is a queue wait, a reconcile's length, a requeue delay or back-off, or a call's latency.
	Duration time.Duration `json:"duration,omitempty"`
	// Error is the error a reconcile returned, a write was refused with or a call failed with;
	// ErrorReason is its Kubernetes status reason when it is an API error ("Conflict", "NotFound").
	Error       string `json:"error,omitempty"`
	ErrorReason string `json:"errorReason,omitempty"`
	// Reconcile identifies the reconcile pass (from the dequeue to the end) a hop belongs to.
	Reconcile uint64 `json:"reconcile,omitempty"`
}

// IsCall reports whether e is a dashboard call with the HTTP method.
func (e *Event) IsCall(method string) bool {
	return e.Hop == DashboardCall && e.Call != nil && e.Call.Method == method
}

// Call is one HTTP request: a write the API server answered, or a controller's call to a dashboard.
type Call struct {
	// Method is the HTTP method of a dashboard call (POST, GET, PUT …).
	Method string `json:"method,omitempty"`
	// URL is a dashboard call's full URL, Path its path ("/api/jobs/").
	URL  string `json:"url,omitempty"`
	Path string `json:"path,omitempty"`
	// Code is the response status (0 when no response came).
	Code int `json:"code,omitempty"`
	// Verb (create, update, patch, delete) and Subresource ("status", or empty) of an API write, and
	// User, the identity that made it.
	Verb        string `json:"verb,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	User        string `json:"user,omitempty"`
	// UserAgent is the client's User-Agent header, for an API write, read, proxy call or watch delivery
	// ("kuberay-operator/v1.6.2").
	UserAgent string `json:"userAgent,omitempty"`
}

// PodStatus is the part of a Pod's status a reader of the chain cares about.
type PodStatus struct {
	// Phase is the Pod's phase; Ready its Ready condition ("True", "False", "Unknown" when absent).
	Phase string `json:"phase,omitempty"`
	Ready string `json:"ready"`
	// Containers are the containers that are not running and ready, in the Pod's order.
	Containers []ContainerState `json:"containers,omitempty"`
}

// IsReady reports whether the Pod's Ready condition is True.
func (p *PodStatus) IsReady() bool { return p != nil && p.Ready == "True" }

// The States of a ContainerState.
const (
	Waiting    = "waiting"
	Running    = "running"
	Terminated = "terminated"
)

// ContainerState is one container of a PodStatus.
type ContainerState struct {
	Name string `json:"name"`
	// State is waiting, running or terminated; Reason the waiting or terminated state's reason.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Ready is the container's readiness.
	Ready bool `json:"ready,omitempty"`
}

// Result is what a Reconcile returned.
type Result struct {
	// Requeue is the deprecated Result.Requeue; RequeueAfter the delay asked for.
	Requeue      bool          `json:"requeue,omitempty"`
	RequeueAfter time.Duration `json:"requeueAfter,omitempty"`
	// RequeueAfterIgnored: Reconcile also returned an error, so the key went to the rate limiter and
	// RequeueAfter was not used.
	RequeueAfterIgnored bool `json:"requeueAfterIgnored,omitempty"`
}

// Change is a Transition's states.
type Change struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Field is one named value of a StatusWrite's summary.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// F returns the Field name=value, the value printed as fmt's %v does.
func F(name string, value any) Field { return Field{Name: name, Value: fmt.Sprint(value)} }

// Sink receives the hops a component emits. Record is called inline in the hop, from many goroutines:
// a Sink must be safe for concurrent use and return quickly.
type Sink interface {
	Record(Event)
}
