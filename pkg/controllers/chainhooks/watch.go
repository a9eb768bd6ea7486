package chainhooks

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NamedPredicate is a predicate with the name the observer reports it under.
type NamedPredicate struct {
	Name string
	predicate.Predicate
}

// Named names p for the observer.
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

func (r eventReporter) report(obj client.Object, t EventType) bool {
	r.h.obs.OnEvent(r.h.controller, RefOf(obj), t)
	return true
}

func (r eventReporter) Create(e event.CreateEvent) bool { return r.report(e.Object, Create) }
func (r eventReporter) Update(e event.UpdateEvent) bool { return r.report(e.ObjectNew, Update) }
func (r eventReporter) Delete(e event.DeleteEvent) bool { return r.report(e.Object, Delete) }
func (r eventReporter) Generic(e event.GenericEvent) bool {
	return r.report(e.Object, Generic)
}

// observedPredicate reports what the wrapped predicate decided.
type observedPredicate struct {
	h *Hooks
	p NamedPredicate
}

func (o observedPredicate) report(obj client.Object, passed bool) bool {
	o.h.obs.OnPredicate(o.h.controller, RefOf(obj), o.p.Name, passed)
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
// builder's Owns uses), observed.
func (h *Hooks) EnqueueController(mgr manager.Manager, ownerType client.Object) handler.EventHandler {
	return h.Handler("controller owner",
		handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), ownerType, handler.OnlyControllerOwner()))
}

// Handler wraps inner so that every key it adds to the queue is reported as a map (from the event's
// object, for reason) and an enqueue.
func (h *Hooks) Handler(reason string, inner handler.EventHandler) handler.EventHandler {
	return &observedHandler{h: h, reason: reason, inner: inner}
}

type observedHandler struct {
	h      *Hooks
	reason string
	inner  handler.EventHandler
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (o *observedHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	o.inner.Create(ctx, e, o.wrap(e.Object, q))
}

func (o *observedHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	o.inner.Update(ctx, e, o.wrap(e.ObjectNew, q))
}

func (o *observedHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	o.inner.Delete(ctx, e, o.wrap(e.Object, q))
}

func (o *observedHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	o.inner.Generic(ctx, e, o.wrap(e.Object, q))
}

// wrap returns a queue that reports what the inner handler adds. A priority queue stays a priority
// queue, so controller-runtime's handlers keep choosing priorities exactly as they would unwrapped.
func (o *observedHandler) wrap(from client.Object, q queue) queue {
	oq := observedQueue{TypedRateLimitingInterface: q, o: o, from: RefOf(from)}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return observedPriorityQueue{PriorityQueue: pq, oq: oq}
	}
	return oq
}

type observedQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	o    *observedHandler
	from Ref
}

func (q observedQueue) report(key types.NamespacedName, after time.Duration) {
	q.o.h.obs.OnMap(q.o.h.controller, q.from, key, q.o.reason)
	q.o.h.enqueued(key, after)
}

func (q observedQueue) Add(item reconcile.Request) {
	q.report(item.NamespacedName, 0)
	q.TypedRateLimitingInterface.Add(item)
}

func (q observedQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.report(item.NamespacedName, d)
	q.TypedRateLimitingInterface.AddAfter(item, d)
}

func (q observedQueue) AddRateLimited(item reconcile.Request) {
	q.report(item.NamespacedName, 0)
	q.TypedRateLimitingInterface.AddRateLimited(item)
}

type observedPriorityQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	oq observedQueue
}

func (q observedPriorityQueue) Add(item reconcile.Request) {
	q.oq.report(item.NamespacedName, 0)
	q.PriorityQueue.Add(item)
}

func (q observedPriorityQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.oq.report(item.NamespacedName, d)
	q.PriorityQueue.AddAfter(item, d)
}

func (q observedPriorityQueue) AddRateLimited(item reconcile.Request) {
	q.oq.report(item.NamespacedName, 0)
	q.PriorityQueue.AddRateLimited(item)
}

func (q observedPriorityQueue) AddWithOpts(opts priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, item := range items {
		q.oq.report(item.NamespacedName, opts.After)
	}
	q.PriorityQueue.AddWithOpts(opts, items...)
}
