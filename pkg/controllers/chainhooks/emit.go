package chainhooks

import (
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
)

// passes numbers reconcile passes across every controller of the process, so a pass's number names
// it in the whole chain.
var passes atomic.Uint64

// emit stamps e with the controller and sends it to the sink.
func (h *Hooks) emit(e chain.Event) {
	if h.sink == nil {
		return
	}
	e.Component = h.controller
	h.sink.Record(e)
}

// keyRef is the Ref of a queue key: an object of the controller's kind.
func (h *Hooks) keyRef(key types.NamespacedName) chain.Ref {
	return chain.Ref{Kind: h.Kind(), Namespace: key.Namespace, Name: key.Name}
}

// passOf is the reconcile pass in progress for key, 0 if none.
func (h *Hooks) passOf(key types.NamespacedName) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.active[key]
}

// event: the controller's cache delivered a watch event for obj (for an update, oldRV is the version
// before).
func (h *Hooks) event(obj chain.Ref, oldRV string, t chain.Outcome) {
	h.emit(chain.Event{Hop: chain.InformerEvent, Object: obj, OldResourceVersion: oldRV, Outcome: t})
}

// predicate: the named predicate let obj's event through or dropped it.
func (h *Hooks) predicate(obj chain.Ref, name string, passed bool) {
	outcome := chain.Passed
	if !passed {
		outcome = chain.Dropped
	}
	h.emit(chain.Event{Hop: chain.PredicateHop, Object: obj, Outcome: outcome, Predicate: name})
}

// mapped: a handler mapped from's event to the key to, for reason ("object", "controller owner").
func (h *Hooks) mapped(from chain.Ref, to types.NamespacedName, reason string) {
	key := h.keyRef(to)
	h.emit(chain.Event{Hop: chain.MapHop, Object: from, To: &key, Reason: reason})
}

// missed: a handler mapped from's event to no key, for reason.
func (h *Hooks) missed(from chain.Ref, reason string) {
	h.emit(chain.Event{Hop: chain.MapMiss, Object: from, Reason: reason})
}

// enqueued: a key entered the work queue.
func (h *Hooks) enqueued(e enqueue) {
	h.emit(chain.Event{Hop: chain.EnqueueHop, Object: h.keyRef(e.key), From: e.from, Outcome: e.kind, Duration: e.after})
}

// dequeued opens a reconcile pass: a worker took key after it had been ready for wait; the hops until
// the reconcile ends carry the pass's number.
func (h *Hooks) dequeued(key types.NamespacedName, wait time.Duration) {
	id := passes.Add(1)
	h.mu.Lock()
	h.active[key] = id
	h.mu.Unlock()
	h.emit(chain.Event{Hop: chain.DequeueHop, Object: h.keyRef(key), Duration: wait, Reconcile: id})
}

// reconcileStarted: Reconcile began for key.
func (h *Hooks) reconcileStarted(key types.NamespacedName) {
	h.emit(chain.Event{Hop: chain.ReconcileStart, Object: h.keyRef(key), Reconcile: h.passOf(key)})
}

// reconcileEnded: Reconcile returned res and err after took; the pass ends.
func (h *Hooks) reconcileEnded(key types.NamespacedName, res reconcile.Result, err error, took time.Duration) {
	e := chain.Event{Hop: chain.ReconcileEnd, Object: h.keyRef(key), Duration: took, Reconcile: h.passOf(key),
		Result: &chain.Result{Requeue: res.Requeue, RequeueAfter: res.RequeueAfter}} //nolint:staticcheck // reported as the controller treats it
	switch {
	case err != nil:
		e.Outcome, e.Error = chain.Failed, err.Error()
		if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
			e.ErrorReason = string(reason)
		}
		e.Result.RequeueAfterIgnored = res.RequeueAfter > 0
	case res.RequeueAfter > 0:
		e.Outcome = chain.RequeueAfter
	case res.Requeue: //nolint:staticcheck // reported as the controller treats it
		e.Outcome = chain.Requeue
	default:
		e.Outcome = chain.Done
	}
	h.emit(e)
	h.mu.Lock()
	delete(h.active, key)
	h.mu.Unlock()
}
