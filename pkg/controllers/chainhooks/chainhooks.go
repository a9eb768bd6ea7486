// Package chainhooks lets an observer watch each hop of a controller's trigger chain — a watch event
// reaching the cache, a predicate passing or dropping it, a handler mapping it to a key (or to none),
// the key entering the work queue (new, coalesced, delayed, rate-limited), a worker taking it, the
// reconcile that follows and what it writes and calls — without changing what the controller does.
//
// A controller builds one Hooks and sets itself up through the Hooks' builder, which reads as
// controller-runtime's and puts the hooks inside:
//
//	h := chainhooks.New("replicaset", observer)
//	err := h.NewControllerManagedBy(mgr).
//		For(&appsv1.ReplicaSet{}, chainhooks.Named("generation changed", predicate.GenerationChangedPredicate{})).
//		Owns(&corev1.Pod{}).
//		Watches(&corev1.Node{}, "node changed", handler.EnqueueRequestsFromMapFunc(everyReplicaSet)).
//		MaxConcurrentReconciles(1).
//		Complete(r)
//
// The pieces it is made of (WatchFor, WatchOwned, Handler, Filter, ControllerOptions, Reconciler) are
// there for a controller that builds its watches another way.
//
// Every decorator calls the wrapped handler, predicate, queue or reconciler exactly as the builder
// would and returns its answer unchanged; the observer only sees copies of what passes through.
package chainhooks

import (
	"context"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// EventType is the kind of watch event a controller's cache delivered.
type EventType string

// The watch event types, as controller-runtime's event package names them.
const (
	Create  EventType = "create"
	Update  EventType = "update"
	Delete  EventType = "delete"
	Generic EventType = "generic"
)

// Ref names one object at one resourceVersion; it is how the hops of a chain link up.
type Ref struct {
	// Kind is the Go type name of the object ("Pod", "RayCluster").
	Kind string `json:"kind"`
	// Namespace and Name identify the object; UID tells a recreated object from its predecessor.
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`
	// ResourceVersion is the version the hop saw.
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// RefOf returns the Ref of obj, naming its kind after its Go type.
func RefOf(obj client.Object) Ref {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return Ref{}
	}
	t := reflect.TypeOf(obj)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return Ref{Kind: t.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()}
}

// EnqueueKind says what an add did to the work queue.
type EnqueueKind string

// The ways a key enters the queue.
const (
	// EnqueueNew: the key was not waiting; it is now.
	EnqueueNew EnqueueKind = "new"
	// EnqueueCoalesced: the key was already waiting to be processed; this add merges into that one.
	EnqueueCoalesced EnqueueKind = "coalesced"
	// EnqueueAdvanced: the key was waiting for a later time (a RequeueAfter, a back-off); this add
	// makes it ready now.
	EnqueueAdvanced EnqueueKind = "advanced"
	// EnqueueRequeueAfter: the controller put the key back for later because Reconcile asked to
	// (Result.RequeueAfter).
	EnqueueRequeueAfter EnqueueKind = "requeue-after"
	// EnqueueRateLimited: the controller put the key back after an error (or Result.Requeue), delayed
	// by the rate limiter's back-off.
	EnqueueRateLimited EnqueueKind = "rate-limited"
	// EnqueueDelayed: a handler asked for the key to be processed after a delay.
	EnqueueDelayed EnqueueKind = "delayed"
)

// Enqueue is one add to a controller's work queue.
type Enqueue struct {
	// Key is the request added.
	Key types.NamespacedName
	// From is the object whose event a handler mapped to Key; nil for the controller's own requeues.
	From *Ref
	// Kind says what the add did.
	Kind EnqueueKind
	// After is the delay asked for (RequeueAfter, AddAfter) or, for a rate-limited add, the back-off
	// the rate limiter chose.
	After time.Duration
}

// Call is one request a reconcile made to something other than the API server (Ray's dashboard).
type Call struct {
	// Method and URL of the request; Code is the response status (0 when no response came).
	Method, URL string
	Code        int
	// Err is the transport error, if any.
	Err string
	// Took is the request's latency.
	Took time.Duration
}

// Observer is told about each hop. Calls come from informer and worker goroutines concurrently, so an
// Observer must be safe for concurrent use, and it must return quickly: it runs inline in the hop.
type Observer interface {
	// OnEvent: the controller's cache delivered a watch event for obj (for an update, oldRV is the
	// version before).
	OnEvent(controller string, obj Ref, oldRV string, eventType EventType)
	// OnPredicate: the named predicate let obj's event through (passed) or dropped it.
	OnPredicate(controller string, obj Ref, predicate string, passed bool)
	// OnMap: a handler mapped obj's event to the key to, for the given reason ("object", "controller owner").
	OnMap(controller string, from Ref, to types.NamespacedName, reason string)
	// OnMapMiss: a handler mapped obj's event to no key, and why (e.g. "no controller owner").
	OnMapMiss(controller string, from Ref, reason string)
	// OnEnqueue: a key entered the controller's work queue.
	OnEnqueue(controller string, e Enqueue)
	// OnDequeue: a worker took key from the queue after it had been ready for wait.
	OnDequeue(controller string, key types.NamespacedName, wait time.Duration)
	// OnReconcileStart: Reconcile began for key.
	OnReconcileStart(controller string, key types.NamespacedName)
	// OnReconcileEnd: Reconcile returned result and err after took.
	OnReconcileEnd(controller string, key types.NamespacedName, result reconcile.Result, err error, took time.Duration)
	// OnStatusWrite: during the reconcile of key, the controller wrote obj's status; obj.ResourceVersion
	// is the new version and summary a few words on the status written (e.g. "state=ready").
	OnStatusWrite(controller string, key types.NamespacedName, obj Ref, summary string)
	// OnWrite: during the reconcile of key, the controller wrote obj (verb "create" or "delete");
	// obj.ResourceVersion is the version the API server returned.
	OnWrite(controller string, key types.NamespacedName, obj Ref, verb string)
	// OnTransition: during the reconcile of key, obj moved from one state to another (a RayJob's
	// jobDeploymentStatus).
	OnTransition(controller string, key types.NamespacedName, obj Ref, from, to string)
	// OnCall: during the reconcile of key, the controller called an outside service.
	OnCall(controller string, key types.NamespacedName, call Call)
}

// Nop is an Observer that ignores everything; it is the default.
type Nop struct{}

// OnEvent implements Observer.
func (Nop) OnEvent(string, Ref, string, EventType) {}

// OnPredicate implements Observer.
func (Nop) OnPredicate(string, Ref, string, bool) {}

// OnMap implements Observer.
func (Nop) OnMap(string, Ref, types.NamespacedName, string) {}

// OnMapMiss implements Observer.
func (Nop) OnMapMiss(string, Ref, string) {}

// OnEnqueue implements Observer.
func (Nop) OnEnqueue(string, Enqueue) {}

// OnDequeue implements Observer.
func (Nop) OnDequeue(string, types.NamespacedName, time.Duration) {}

// OnReconcileStart implements Observer.
func (Nop) OnReconcileStart(string, types.NamespacedName) {}

// OnReconcileEnd implements Observer.
func (Nop) OnReconcileEnd(string, types.NamespacedName, reconcile.Result, error, time.Duration) {}

// OnStatusWrite implements Observer.
func (Nop) OnStatusWrite(string, types.NamespacedName, Ref, string) {}

// OnWrite implements Observer.
func (Nop) OnWrite(string, types.NamespacedName, Ref, string) {}

// OnTransition implements Observer.
func (Nop) OnTransition(string, types.NamespacedName, Ref, string, string) {}

// OnCall implements Observer.
func (Nop) OnCall(string, types.NamespacedName, Call) {}

// Hooks decorates one controller's handlers, predicates, queue and reconciler for an Observer.
type Hooks struct {
	controller string
	obs        Observer
	queue      *queueState

	mu      sync.Mutex
	kind    string
	watches []Watch
}

// New returns the Hooks of the named controller; a nil observer means Nop.
func New(controller string, obs Observer) *Hooks {
	if obs == nil {
		obs = Nop{}
	}
	return &Hooks{controller: controller, obs: obs, queue: newQueueState()}
}

// Controller returns the controller's name.
func (h *Hooks) Controller() string { return h.controller }

type reconcileKey struct{}

type inReconcile struct {
	h   *Hooks
	key types.NamespacedName
}

// from returns the reconcile ctx belongs to, if any.
func from(ctx context.Context) (inReconcile, bool) {
	r, ok := ctx.Value(reconcileKey{}).(inReconcile)
	return r, ok
}

// Reconciler wraps r so the observer sees each reconcile's start and end, and so the writes and calls
// made with the reconcile's context are attributed to it.
func (h *Hooks) Reconciler(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		h.obs.OnReconcileStart(h.controller, req.NamespacedName)
		ctx = context.WithValue(ctx, reconcileKey{}, inReconcile{h: h, key: req.NamespacedName})
		start := time.Now()
		res, err := r.Reconcile(ctx, req)
		h.obs.OnReconcileEnd(h.controller, req.NamespacedName, res, err, time.Since(start))
		return res, err
	})
}

// StatusWritten tells the observer that obj's status was written; call it after a successful status
// update with ctx of the reconcile, the object the API server returned and a few words on the status.
func (h *Hooks) StatusWritten(ctx context.Context, obj client.Object, summary string) {
	h.obs.OnStatusWrite(h.controller, h.keyOf(ctx, obj), RefOf(obj), summary)
}

// Wrote tells the observer that the controller created or deleted obj (verb "create", "delete") during
// the reconcile of ctx; call it after the write succeeded, with the object the API server returned. A
// delete's answer is not read back, so its Ref carries no resourceVersion (the one obj has is an older
// write's).
func (h *Hooks) Wrote(ctx context.Context, obj client.Object, verb string) {
	ref := RefOf(obj)
	if verb == "delete" {
		ref.ResourceVersion = ""
	}
	h.obs.OnWrite(h.controller, h.keyOf(ctx, obj), ref, verb)
}

// Transition tells the observer that obj moved from one state to another during the reconcile of ctx.
func (h *Hooks) Transition(ctx context.Context, obj client.Object, from, to string) {
	h.obs.OnTransition(h.controller, h.keyOf(ctx, obj), RefOf(obj), from, to)
}

// keyOf is the key of the reconcile ctx belongs to, else obj's own name.
func (h *Hooks) keyOf(ctx context.Context, obj client.Object) types.NamespacedName {
	if r, ok := from(ctx); ok && r.h == h {
		return r.key
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}
