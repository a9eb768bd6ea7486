package chainhooks

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
)

// queueState is what Hooks knows about its controller's queue.
type queueState struct {
	mu          sync.Mutex
	q           *hookedQueue
	hooks       *Hooks
	pending     map[types.NamespacedName]time.Time // when each waiting key is (or was) ready
	busy        map[types.NamespacedName]bool
	limited     map[types.NamespacedName][]*chain.Ref // rate-limited adds waiting for the limiter's answer
	concurrency int
}

func newQueueState() *queueState {
	return &queueState{
		pending: map[types.NamespacedName]time.Time{},
		busy:    map[types.NamespacedName]bool{},
		limited: map[types.NamespacedName][]*chain.Ref{},
	}
}

// Stats returns the queue's depth and the workers' load; zero before the controller starts.
func (h *Hooks) Stats() chain.QueueStats {
	s := h.queue
	s.mu.Lock()
	defer s.mu.Unlock()
	st := chain.QueueStats{Busy: len(s.busy), Concurrency: s.concurrency}
	if s.q != nil {
		st.Depth = s.q.PriorityQueue.Len()
	}
	return st
}

// ControllerOptions returns opts with a work queue (controller-runtime's priority queue, as by default)
// and rate limiter (controller-runtime's default for it unless opts has one) that report every add,
// every take and every back-off to the sink.
func (h *Hooks) ControllerOptions(opts controller.Options) controller.Options {
	limiter := opts.RateLimiter
	if limiter == nil {
		limiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 1000*time.Second)
	}
	observed := &observedLimiter{TypedRateLimiter: limiter, s: h.queue}
	opts.RateLimiter = observed
	h.queue.mu.Lock()
	h.queue.hooks = h
	h.queue.concurrency = max(opts.MaxConcurrentReconciles, 1)
	h.queue.mu.Unlock()
	opts.NewQueue = func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		inner := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) { o.RateLimiter = rl })
		q := &hookedQueue{PriorityQueue: inner, h: h}
		h.queue.mu.Lock()
		h.queue.q = q
		h.queue.mu.Unlock()
		return q
	}
	return opts
}

// observedLimiter reports rate-limited adds with the back-off it hands out. The priority queue asks
// the limiter when it takes the add from its buffer, after AddWithOpts returned, so this is where the
// delay is known.
type observedLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	s *queueState
}

func (l *observedLimiter) When(item reconcile.Request) time.Duration {
	d := l.TypedRateLimiter.When(item)
	s, key := l.s, keyOf(item)
	s.mu.Lock()
	var from *chain.Ref
	waiting := s.limited[key]
	if len(waiting) > 0 {
		from = waiting[0]
		s.limited[key] = waiting[1:]
		if len(s.limited[key]) == 0 {
			delete(s.limited, key)
		}
	}
	if at, ok := s.pending[key]; !ok || time.Now().Add(d).Before(at) {
		s.pending[key] = time.Now().Add(d)
	}
	h := s.hooks
	s.mu.Unlock()
	if h != nil {
		kind := chain.EnqueueRateLimited
		if from != nil {
			kind = chain.EnqueueDelayed
		}
		h.enqueued(enqueue{key: key, from: from, kind: kind, after: d})
	}
	return d
}

// hookedQueue is a controller's work queue that reports adds and takes.
type hookedQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	h *Hooks
}

func (q *hookedQueue) Add(item reconcile.Request) { q.add(nil, priorityqueue.AddOpts{}, item) }

func (q *hookedQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.add(nil, priorityqueue.AddOpts{After: d}, item)
}

func (q *hookedQueue) AddRateLimited(item reconcile.Request) {
	q.add(nil, priorityqueue.AddOpts{RateLimited: true}, item)
}

func (q *hookedQueue) AddWithOpts(opts priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, item := range items {
		q.add(nil, opts, item)
	}
}

// add classifies one add (from is the mapped object for a handler's add, nil for the controller's own
// requeue), makes it, and reports it.
func (q *hookedQueue) add(from *chain.Ref, opts priorityqueue.AddOpts, item reconcile.Request) {
	s, key, now := q.h.queue, keyOf(item), time.Now()
	s.mu.Lock()
	ready, waiting := s.pending[key]
	var kind chain.Outcome
	switch {
	case from == nil && opts.After > 0:
		kind = chain.EnqueueRequeueAfter
	case opts.After > 0:
		kind = chain.EnqueueDelayed
	case waiting && !ready.After(now):
		kind = chain.EnqueueCoalesced
	case waiting:
		kind = chain.EnqueueAdvanced
	default:
		kind = chain.EnqueueNew
	}
	if opts.RateLimited {
		// Reported by the limiter, which alone knows the back-off.
		s.limited[key] = append(s.limited[key], from)
		s.mu.Unlock()
		q.PriorityQueue.AddWithOpts(opts, item)
		return
	}
	if at := now.Add(opts.After); !waiting || at.Before(ready) {
		s.pending[key] = at
	}
	s.mu.Unlock()
	// Reported before the add, so a worker's take is never reported ahead of it.
	q.h.enqueued(enqueue{key: key, from: from, kind: kind, after: opts.After})
	q.PriorityQueue.AddWithOpts(opts, item)
}

func (q *hookedQueue) Get() (reconcile.Request, bool) {
	item, _, shutdown := q.GetWithPriority()
	return item, shutdown
}

func (q *hookedQueue) GetWithPriority() (reconcile.Request, int, bool) {
	item, prio, shutdown := q.PriorityQueue.GetWithPriority()
	if shutdown {
		return item, prio, shutdown
	}
	s, key, now := q.h.queue, keyOf(item), time.Now()
	s.mu.Lock()
	var wait time.Duration
	if ready, ok := s.pending[key]; ok && now.After(ready) {
		wait = now.Sub(ready)
	}
	delete(s.pending, key)
	s.busy[key] = true
	s.mu.Unlock()
	q.h.dequeued(key, wait)
	return item, prio, shutdown
}

func (q *hookedQueue) Done(item reconcile.Request) {
	q.PriorityQueue.Done(item)
	s := q.h.queue
	s.mu.Lock()
	delete(s.busy, keyOf(item))
	s.mu.Unlock()
}
