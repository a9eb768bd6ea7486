package chainhooks

import (
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Builder is controller-runtime's builder with the hooks inside, so that a controller's setup reads as
// the sentence it is (For this kind with these predicates, Owns those kinds, Watches that kind mapped
// so) while the sink sees every hop. Start one with Hooks.NewControllerManagedBy.
type Builder struct {
	mgr    manager.Manager
	h      *Hooks
	b      *builder.Builder
	forObj client.Object
	opts   controller.Options
}

// NewControllerManagedBy starts a Builder for the controller the hooks are named after.
func (h *Hooks) NewControllerManagedBy(mgr manager.Manager) *Builder {
	return &Builder{mgr: mgr, h: h, b: builder.ControllerManagedBy(mgr).Named(h.controller), opts: controller.Options{MaxConcurrentReconciles: 1}}
}

// For names the controller's own kind: its events, after preds, enqueue the object itself (the
// builder's For, spelled as the Watches it stands for).
func (b *Builder) For(obj client.Object, preds ...NamedPredicate) *Builder {
	b.forObj = obj
	b.b = b.b.Watches(b.h.WatchFor(obj, preds...))
	return b
}

// Owns names a kind the controller creates: its events, after preds, enqueue its controller owner of
// the For kind (the builder's Owns with OnlyControllerOwner). Call For first.
func (b *Builder) Owns(obj client.Object, preds ...NamedPredicate) *Builder {
	if b.forObj == nil {
		panic("chainhooks: Owns before For")
	}
	b.b = b.b.Watches(b.h.WatchOwned(b.mgr, obj, b.forObj, preds...))
	return b
}

// Watches maps obj's events to keys with mapper, observed under reason (e.g. "orphan pod selected").
// With preds, each event is reported and then filtered by them; without, the watch has no predicates.
func (b *Builder) Watches(obj client.Object, reason string, mapper handler.EventHandler, preds ...NamedPredicate) *Builder {
	var opts []builder.WatchesOption
	if len(preds) > 0 {
		opts = append(opts, b.h.Filter(preds...))
	}
	b.b = b.b.Watches(obj, b.h.Handler(reason, mapper), opts...)
	return b
}

// MaxConcurrentReconciles sets how many keys are reconciled at once (at least 1; 1 unless set).
func (b *Builder) MaxConcurrentReconciles(n int) *Builder {
	b.opts.MaxConcurrentReconciles = max(n, 1)
	return b
}

// WithOptions sets the controller's options (the work queue and rate limiter are wrapped for the
// sink on Complete; a RateLimiter given here is kept).
func (b *Builder) WithOptions(opts controller.Options) *Builder {
	opts.MaxConcurrentReconciles = max(opts.MaxConcurrentReconciles, 1)
	b.opts = opts
	return b
}

// Complete builds the controller around r, observed, and adds it to the manager.
func (b *Builder) Complete(r reconcile.Reconciler) error {
	return b.b.WithOptions(b.h.ControllerOptions(b.opts)).Complete(b.h.Reconciler(r))
}
