// Package chainhooks lets an observer watch each hop of a controller's trigger chain — a watch event
// reaching the cache, a predicate passing or dropping it, a handler mapping it to a key, the key being
// enqueued, the reconcile that follows and the status it writes — without changing what the controller does.
//
// A controller builds one Hooks and wraps what it hands to the builder:
//
//	h := chainhooks.New("raycluster", observer)
//	ctrl.NewControllerManagedBy(mgr).Named("raycluster").
//		Watches(&rayv1.RayCluster{}, h.EnqueueObject(), h.Filter(chainhooks.Named("generation changed", predicate.GenerationChangedPredicate{}))).
//		Watches(&corev1.Pod{}, h.EnqueueController(mgr, &rayv1.RayCluster{}), h.Filter()).
//		Complete(h.Reconciler(r))
//
// Every decorator calls the wrapped handler, predicate or reconciler exactly as the builder would and
// returns its answer unchanged; the observer only sees copies of what passes through.
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
	Kind string
	// Namespace and Name identify the object.
	Namespace, Name string
	// ResourceVersion is the version the hop saw.
	ResourceVersion string
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
	return Ref{Kind: t.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), ResourceVersion: obj.GetResourceVersion()}
}

// Observer is told about each hop. Calls come from informer and worker goroutines concurrently, so an
// Observer must be safe for concurrent use, and it must return quickly: it runs inline in the hop.
type Observer interface {
	// OnEvent: the controller's cache delivered a watch event for obj.
	OnEvent(controller string, obj Ref, eventType EventType)
	// OnPredicate: the named predicate let obj's event through (passed) or dropped it.
	OnPredicate(controller string, obj Ref, predicate string, passed bool)
	// OnMap: a handler mapped obj's event to the key to, for the given reason ("object", "controller owner").
	OnMap(controller string, from Ref, to types.NamespacedName, reason string)
	// OnEnqueue: the key was added to the controller's work queue (after is its delay, 0 for none).
	OnEnqueue(controller string, key types.NamespacedName, after time.Duration)
	// OnReconcileStart: a worker took the key; waited is how long since it was first enqueued by a
	// handler (0 when unknown, e.g. for a RequeueAfter).
	OnReconcileStart(controller string, key types.NamespacedName, waited time.Duration)
	// OnReconcileEnd: Reconcile returned result and err after took.
	OnReconcileEnd(controller string, key types.NamespacedName, result reconcile.Result, err error, took time.Duration)
	// OnStatusWrite: the controller wrote obj's status; obj.ResourceVersion is the new version.
	OnStatusWrite(controller string, obj Ref)
}

// Nop is an Observer that ignores everything; it is the default.
type Nop struct{}

// OnEvent implements Observer.
func (Nop) OnEvent(string, Ref, EventType) {}

// OnPredicate implements Observer.
func (Nop) OnPredicate(string, Ref, string, bool) {}

// OnMap implements Observer.
func (Nop) OnMap(string, Ref, types.NamespacedName, string) {}

// OnEnqueue implements Observer.
func (Nop) OnEnqueue(string, types.NamespacedName, time.Duration) {}

// OnReconcileStart implements Observer.
func (Nop) OnReconcileStart(string, types.NamespacedName, time.Duration) {}

// OnReconcileEnd implements Observer.
func (Nop) OnReconcileEnd(string, types.NamespacedName, reconcile.Result, error, time.Duration) {}

// OnStatusWrite implements Observer.
func (Nop) OnStatusWrite(string, Ref) {}

// Hooks decorates one controller's handlers, predicates and reconciler for an Observer.
type Hooks struct {
	controller string
	obs        Observer

	mu     sync.Mutex
	queued map[types.NamespacedName]time.Time // first handler enqueue not yet taken by a worker
}

// New returns the Hooks of the named controller; a nil observer means Nop.
func New(controller string, obs Observer) *Hooks {
	if obs == nil {
		obs = Nop{}
	}
	return &Hooks{controller: controller, obs: obs, queued: map[types.NamespacedName]time.Time{}}
}

// Controller returns the controller's name.
func (h *Hooks) Controller() string { return h.controller }

// StatusWritten tells the observer that obj's status was written; call it after a successful status
// update with the object the API server returned.
func (h *Hooks) StatusWritten(obj client.Object) {
	h.obs.OnStatusWrite(h.controller, RefOf(obj))
}

// enqueued remembers when key was first enqueued, for the queue wait reported at reconcile start.
func (h *Hooks) enqueued(key types.NamespacedName, after time.Duration) {
	h.mu.Lock()
	if _, ok := h.queued[key]; !ok {
		h.queued[key] = time.Now().Add(after)
	}
	h.mu.Unlock()
	h.obs.OnEnqueue(h.controller, key, after)
}

// taken returns how long key waited in the queue, and forgets it.
func (h *Hooks) taken(key types.NamespacedName) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.queued[key]
	if !ok {
		return 0
	}
	delete(h.queued, key)
	if d := time.Since(t); d > 0 {
		return d
	}
	return 0
}

// Reconciler wraps r so the observer sees each reconcile's start (with its queue wait) and end.
func (h *Hooks) Reconciler(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		h.obs.OnReconcileStart(h.controller, req.NamespacedName, h.taken(req.NamespacedName))
		start := time.Now()
		res, err := r.Reconcile(ctx, req)
		h.obs.OnReconcileEnd(h.controller, req.NamespacedName, res, err, time.Since(start))
		return res, err
	})
}
