package chainhooks

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
)

// NamedPredicate is a predicate with the name the sink sees it under.
type NamedPredicate struct {
	Name string
	predicate.Predicate
}

// Named names p for the sink.
func Named(name string, p predicate.Predicate) NamedPredicate {
	return NamedPredicate{Name: name, Predicate: p}
}

// Filter returns the predicates option for one watch: first an always-passing predicate that reports
// each event the cache delivers, then preds in order, each reporting whether it passed. With no preds
// the watch lets every event through, exactly as a watch without predicates does.
func (h *Hooks) Filter(preds ...NamedPredicate) builder.Predicates {
	return builder.WithPredicates(h.Predicates(preds...)...)
}

// Predicates returns the predicates Filter wraps, for a caller that is not using the builder.
func (h *Hooks) Predicates(preds ...NamedPredicate) []predicate.Predicate {
	ps := []predicate.Predicate{eventReporter{h}}
	for _, p := range preds {
		ps = append(ps, observedPredicate{h: h, p: p})
	}
	return ps
}

// eventReporter reports every event and lets it through.
type eventReporter struct{ h *Hooks }

func (r eventReporter) report(obj client.Object, oldRV string, t chain.Outcome) bool {
	r.h.event(RefOf(obj), oldRV, t)
	return true
}

func (r eventReporter) Create(e event.CreateEvent) bool { return r.report(e.Object, "", chain.Create) }
func (r eventReporter) Update(e event.UpdateEvent) bool {
	old := ""
	if e.ObjectOld != nil {
		old = e.ObjectOld.GetResourceVersion()
	}
	return r.report(e.ObjectNew, old, chain.Update)
}
func (r eventReporter) Delete(e event.DeleteEvent) bool { return r.report(e.Object, "", chain.Delete) }
func (r eventReporter) Generic(e event.GenericEvent) bool {
	return r.report(e.Object, "", chain.Generic)
}

// observedPredicate reports what the wrapped predicate decided.
type observedPredicate struct {
	h *Hooks
	p NamedPredicate
}

func (o observedPredicate) report(obj client.Object, passed bool) bool {
	o.h.predicate(RefOf(obj), o.p.Name, passed)
	return passed
}

func (o observedPredicate) Create(e event.CreateEvent) bool {
	return o.report(e.Object, o.p.Create(e))
}
func (o observedPredicate) Update(e event.UpdateEvent) bool {
	return o.report(e.ObjectNew, o.p.Update(e))
}
func (o observedPredicate) Delete(e event.DeleteEvent) bool {
	return o.report(e.Object, o.p.Delete(e))
}
func (o observedPredicate) Generic(e event.GenericEvent) bool {
	return o.report(e.Object, o.p.Generic(e))
}

// EnqueueObject is handler.EnqueueRequestForObject (what the builder's For uses), observed.
func (h *Hooks) EnqueueObject() handler.EventHandler {
	return h.Handler("object", &handler.EnqueueRequestForObject{})
}

// EnqueueController is handler.EnqueueRequestForOwner(…, ownerType, OnlyControllerOwner()) (what the
// builder's Owns uses), observed; an event it maps to no key is reported with the reason (no
// controller owner, or one of a kind this watch does not map to).
func (h *Hooks) EnqueueController(mgr manager.Manager, ownerType client.Object) handler.EventHandler {
	inner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), ownerType, handler.OnlyControllerOwner())
	gvk, err := apiutil.GVKForObject(ownerType, mgr.GetScheme())
	if err != nil {
		return h.Handler("controller owner", inner)
	}
	return &observedHandler{h: h, reason: "controller owner", inner: inner, miss: func(objs ...client.Object) string {
		return controllerOwnerMiss(gvk.GroupKind(), objs...)
	}}
}

// controllerOwnerMiss says why objs (an event's objects) map to no owner of kind want.
func controllerOwnerMiss(want schema.GroupKind, objs ...client.Object) string {
	for _, obj := range objs {
		if obj == nil {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
			gv, _ := schema.ParseGroupVersion(ref.APIVersion)
			if gv.Group != want.Group || ref.Kind != want.Kind {
				return fmt.Sprintf("controller owner is %s %s, not a %s", ref.Kind, ref.Name, want.Kind)
			}
		}
	}
	return "no controller owner (ownerReferences without controller: true to a " + want.Kind + ")"
}

// Handler wraps inner so that every key it adds to the queue is reported as a map (from the event's
// object, for reason) followed by an enqueue, and an event it maps to nothing as a miss.
func (h *Hooks) Handler(reason string, inner handler.EventHandler) handler.EventHandler {
	return &observedHandler{h: h, reason: reason, inner: inner}
}

type observedHandler struct {
	h      *Hooks
	reason string
	inner  handler.EventHandler
	miss   func(objs ...client.Object) string
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (o *observedHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	v := o.wrap(e.Object, q)
	o.inner.Create(ctx, e, v)
	o.checkMiss(v, e.Object)
}

func (o *observedHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	v := o.wrap(e.ObjectNew, q)
	o.inner.Update(ctx, e, v)
	o.checkMiss(v, e.ObjectNew, e.ObjectOld)
}

func (o *observedHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	v := o.wrap(e.Object, q)
	o.inner.Delete(ctx, e, v)
	o.checkMiss(v, e.Object)
}

func (o *observedHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	v := o.wrap(e.Object, q)
	o.inner.Generic(ctx, e, v)
	o.checkMiss(v, e.Object)
}

// checkMiss reports an event the inner handler mapped to no key.
func (o *observedHandler) checkMiss(v queue, objs ...client.Object) {
	var adds int64
	switch v := v.(type) {
	case observedQueue:
		adds = v.adds.Load()
	case observedPriorityQueue:
		adds = v.oq.adds.Load()
	}
	if adds > 0 {
		return
	}
	reason := "the handler mapped the event to no key"
	if o.miss != nil {
		reason = o.miss(objs...)
	}
	o.h.missed(RefOf(objs[0]), reason)
}

// wrap returns a queue that reports what the inner handler adds. A priority queue stays a priority
// queue, so controller-runtime's handlers keep choosing priorities exactly as they would unwrapped.
func (o *observedHandler) wrap(from client.Object, q queue) queue {
	oq := observedQueue{TypedRateLimitingInterface: q, o: o, from: RefOf(from), adds: new(atomic.Int64)}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return observedPriorityQueue{PriorityQueue: pq, oq: oq}
	}
	return oq
}

// observedQueue is the view of the controller's queue one handler call gets.
type observedQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	o    *observedHandler
	from chain.Ref
	adds *atomic.Int64
}

// add reports the map, then adds through the controller's queue: a hooked queue reports the enqueue
// itself (it knows whether the key was waiting); any other queue gets it reported here.
func (q observedQueue) add(opts priorityqueue.AddOpts, item reconcile.Request, plain func()) {
	q.adds.Add(1)
	q.o.h.mapped(q.from, item.NamespacedName, q.o.reason)
	if hq, ok := q.TypedRateLimitingInterface.(*hookedQueue); ok {
		from := q.from
		hq.add(&from, opts, item)
		return
	}
	kind := chain.EnqueueNew
	if opts.After > 0 {
		kind = chain.EnqueueDelayed
	}
	from := q.from
	q.o.h.enqueued(enqueue{key: item.NamespacedName, from: &from, kind: kind, after: opts.After})
	plain()
}

func (q observedQueue) Add(item reconcile.Request) {
	q.add(priorityqueue.AddOpts{}, item, func() { q.TypedRateLimitingInterface.Add(item) })
}

func (q observedQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.add(priorityqueue.AddOpts{After: d}, item, func() { q.TypedRateLimitingInterface.AddAfter(item, d) })
}

func (q observedQueue) AddRateLimited(item reconcile.Request) {
	q.add(priorityqueue.AddOpts{RateLimited: true}, item, func() { q.TypedRateLimitingInterface.AddRateLimited(item) })
}

type observedPriorityQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	oq observedQueue
}

func (q observedPriorityQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q observedPriorityQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, item)
}

func (q observedPriorityQueue) AddRateLimited(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

func (q observedPriorityQueue) AddWithOpts(opts priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, item := range items {
		q.oq.add(opts, item, func() { q.PriorityQueue.AddWithOpts(opts, item) })
	}
}

// keyOf names a request.
func keyOf(r reconcile.Request) types.NamespacedName { return r.NamespacedName }

// WatchFor returns the arguments of the builder's Watches for the controller's own kind (what For
// does): obj's events enqueue obj, after preds.
//
//	ctrl.NewControllerManagedBy(mgr).Watches(h.WatchFor(&rayv1.RayCluster{}, pred))
func (h *Hooks) WatchFor(obj client.Object, preds ...NamedPredicate) (client.Object, handler.EventHandler, builder.WatchesOption) {
	h.describe(obj, "object", preds, true)
	return obj, h.EnqueueObject(), h.Filter(preds...)
}

// WatchOwned returns the arguments of the builder's Watches for a kind the controller owns (what Owns
// does): obj's events enqueue its controller owner of owner's kind, after preds.
func (h *Hooks) WatchOwned(mgr manager.Manager, obj, owner client.Object, preds ...NamedPredicate) (client.Object, handler.EventHandler, builder.WatchesOption) {
	h.describe(obj, "controller owner", preds, false)
	return obj, h.EnqueueController(mgr, owner), h.Filter(preds...)
}

func (h *Hooks) describe(obj client.Object, handler string, preds []NamedPredicate, own bool) {
	w := chain.WatchInfo{Kind: RefOf(obj).Kind, Handler: handler}
	for _, p := range preds {
		w.Predicates = append(w.Predicates, p.Name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if own {
		h.kind = w.Kind
	}
	h.watches = append(h.watches, w)
}

// Kind is the kind of the controller's keys (its WatchFor kind), once set up.
func (h *Hooks) Kind() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.kind
}

// Watches are the controller's watches, in the order they were set up.
func (h *Hooks) Watches() []chain.WatchInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]chain.WatchInfo(nil), h.watches...)
}
