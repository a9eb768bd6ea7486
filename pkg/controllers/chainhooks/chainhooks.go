// Package chainhooks lets a chain.Sink see each hop of a controller's trigger chain — a watch event
// reaching the cache, a predicate passing or dropping it, a handler mapping it to a key (or to none),
// the key entering the work queue (new, coalesced, delayed, rate-limited), a worker taking it, the
// reconcile that follows and what it writes and calls — without changing what the controller does.
//
// A controller builds one Hooks and sets itself up through the Hooks' builder, which reads as
// controller-runtime's and puts the hooks inside:
//
//	h := chainhooks.New("replicaset", sink)
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
// would and returns its answer unchanged; the sink only sees chain.Events made of copies of what passes
// through. The hooks build those events at this seam (chainhooks imports chain, never the reverse):
// they number reconcile passes and name a queue key after the controller's kind.
package chainhooks

import (
	"context"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
)

// RefOf returns the Ref of obj, naming its kind after its Go type (chain.KindOf), or an unstructured
// object's after the kind it carries.
func RefOf(obj client.Object) chain.Ref {
	kind := chain.KindOf(obj)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		kind = u.GetKind()
	}
	if kind == "" {
		return chain.Ref{}
	}
	return chain.Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()}
}

// enqueue is one add to a controller's work queue.
type enqueue struct {
	// key is the request added.
	key types.NamespacedName
	// from is the object whose event a handler mapped to key; nil for the controller's own requeues.
	from *chain.Ref
	// kind says what the add did.
	kind chain.Outcome
	// after is the delay asked for (RequeueAfter, AddAfter) or, for a rate-limited add, the back-off
	// the rate limiter chose.
	after time.Duration
}

// Hooks decorates one controller's handlers, predicates, queue and reconciler for a chain.Sink.
type Hooks struct {
	controller string
	sink       chain.Sink
	queue      *queueState

	mu      sync.Mutex
	kind    string
	watches []chain.WatchInfo
	active  map[types.NamespacedName]uint64 // the reconcile pass in progress per key
}

// New returns the Hooks of the named controller; a nil sink sees nothing.
func New(controller string, sink chain.Sink) *Hooks {
	return &Hooks{controller: controller, sink: sink, queue: newQueueState(), active: map[types.NamespacedName]uint64{}}
}

// Controller returns the controller's name.
func (h *Hooks) Controller() string { return h.controller }

// Sub returns the Hooks of a further controller-runtime controller that the controller h belongs to
// sets up (one per kind it watches, say), named `<controller>-<name>` and reporting to h's sink.
func (h *Hooks) Sub(name string) *Hooks { return New(h.controller+"-"+name, h.sink) }

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

// Reconciler wraps r so the sink sees each reconcile's start and end, and so the writes and calls
// made with the reconcile's context are attributed to it.
func (h *Hooks) Reconciler(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		h.reconcileStarted(req.NamespacedName)
		ctx = context.WithValue(ctx, reconcileKey{}, inReconcile{h: h, key: req.NamespacedName})
		start := time.Now()
		res, err := r.Reconcile(ctx, req)
		h.reconcileEnded(req.NamespacedName, res, err, time.Since(start))
		return res, err
	})
}

// StatusWritten tells the sink that obj's status was written; call it after a successful status
// update with ctx of the reconcile, the object the API server returned and a few fields of the status
// (chain.F("state", st.State), …).
func (h *Hooks) StatusWritten(ctx context.Context, obj client.Object, summary ...chain.Field) {
	key := h.keyOf(ctx, obj)
	h.emit(chain.Event{Hop: chain.StatusWrite, Object: RefOf(obj), Status: summary, Reconcile: h.passOf(key)})
}

// Wrote tells the sink that the controller created, updated or deleted obj (verb chain.Create,
// chain.Update, chain.Delete) during the reconcile of ctx; call it after the write succeeded, with the
// object the API server returned. A delete's answer is not read back, so its Ref carries no
// resourceVersion (the one obj has is an older write's).
func (h *Hooks) Wrote(ctx context.Context, obj client.Object, verb chain.Outcome) {
	ref := RefOf(obj)
	if verb == chain.Delete {
		ref.ResourceVersion = ""
	}
	h.emit(chain.Event{Hop: chain.ObjectWrite, Object: ref, Outcome: verb, Reconcile: h.passOf(h.keyOf(ctx, obj))})
}

// CreateOrUpdate is controllerutil.CreateOrUpdate that tells the sink what it did to obj during the
// reconcile of ctx: a create or an update (an ObjectWrite with the resourceVersion the API server
// returned); nothing when obj was already as mutate wants it, nor for an update the API server found
// changed nothing (its resourceVersion kept: a field mutate left out that the server defaults).
func (h *Hooks) CreateOrUpdate(ctx context.Context, c client.Client, obj client.Object, mutate controllerutil.MutateFn) (controllerutil.OperationResult, error) {
	var before string
	res, err := controllerutil.CreateOrUpdate(ctx, c, obj, func() error {
		before = obj.GetResourceVersion()
		return mutate()
	})
	switch {
	case err != nil:
	case res == controllerutil.OperationResultCreated:
		h.Wrote(ctx, obj, chain.Create)
	case res == controllerutil.OperationResultUpdated && obj.GetResourceVersion() != before:
		h.Wrote(ctx, obj, chain.Update)
	}
	return res, err
}

// Transition tells the sink that obj moved from one state to another during the reconcile of ctx.
func (h *Hooks) Transition(ctx context.Context, obj client.Object, from, to string) {
	h.emit(chain.Event{Hop: chain.Transition, Object: RefOf(obj), Outcome: chain.Outcome(to), Change: &chain.Change{From: from, To: to},
		Reconcile: h.passOf(h.keyOf(ctx, obj))})
}

// keyOf is the key of the reconcile ctx belongs to, else obj's own name.
func (h *Hooks) keyOf(ctx context.Context, obj client.Object) types.NamespacedName {
	if r, ok := from(ctx); ok && r.h == h {
		return r.key
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}
