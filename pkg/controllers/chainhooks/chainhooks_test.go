package chainhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
)

// log is a chain.Sink that keeps one line per hop.
type log struct {
	mu    sync.Mutex
	lines []string
	keys  map[uint64]string // reconcile pass → its key, from the dequeue
}

func (l *log) add(format string, args ...any) {
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *log) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *log) Record(e chain.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, o := e.Component, e.Object
	key := o.Namespace + "/" + o.Name
	by := l.keys[e.Reconcile]
	switch e.Hop {
	case chain.InformerEvent:
		l.add("%s event %s %s/%s@%s old=%s", c, e.Outcome, o.Kind, o.Name, o.ResourceVersion, e.OldResourceVersion)
	case chain.PredicateHop:
		l.add("%s predicate %s %v", c, e.Predicate, e.Outcome == chain.Passed)
	case chain.MapHop:
		l.add("%s map %s -> %s/%s (%s)", c, o.Name, e.To.Namespace, e.To.Name, e.Reason)
	case chain.MapMiss:
		l.add("%s miss %s: %s", c, o.Name, e.Reason)
	case chain.EnqueueHop:
		src := "self"
		if e.From != nil {
			src = e.From.Name
		}
		l.add("%s enqueue %s %s from %s after %s", c, key, e.Outcome, src, e.Duration)
	case chain.DequeueHop:
		if l.keys == nil {
			l.keys = map[uint64]string{}
		}
		l.keys[e.Reconcile] = key
		l.add("%s dequeue %s", c, key)
	case chain.ReconcileStart:
		l.add("%s start %s", c, key)
	case chain.ReconcileEnd:
		l.add("%s end %s after=%s err=%s ignored=%v", c, key, e.Result.RequeueAfter, e.Error, e.Result.RequeueAfterIgnored)
	case chain.StatusWrite:
		l.add("%s status %s by %s: %v", c, o.Name, by, e.Status)
	case chain.Transition:
		l.add("%s transition %s %s->%s", c, o.Name, e.Change.From, e.Change.To)
	case chain.ObjectWrite:
		l.add("%s %s %s by %s", c, e.Outcome, o.Name, by)
	case chain.DashboardCall:
		l.add("%s call %s %s %d by %s", c, e.Call.Method, e.Call.Path, e.Call.Code, by)
	}
}

func pod(name, rv string, owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv, OwnerReferences: owners}}
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("hops:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFilterReportsAndKeepsDecisions(t *testing.T) {
	l := &log{}
	h := New("c", l)
	preds := h.Predicates(Named("generation", predicate.GenerationChangedPredicate{}))
	e := event.UpdateEvent{ObjectOld: pod("p", "1"), ObjectNew: pod("p", "2")}
	passed := true
	for _, p := range preds {
		if !p.Update(e) {
			passed = false
			break
		}
	}
	if passed {
		t.Fatal("an update without a generation change passed")
	}
	expect(t, l.got(), "c event update Pod/p@2 old=1", "c predicate generation false")
	// With no predicates the watch lets everything through and only reports the event.
	for _, p := range h.Predicates() {
		if !p.Create(event.CreateEvent{Object: pod("p", "2")}) {
			t.Fatal("an empty filter dropped an event")
		}
	}
}

func TestHandlerKeepsPriorityQueue(t *testing.T) {
	l := &log{}
	h := New("c", l)
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	hd := h.Handler("object", &handler.EnqueueRequestForObject{})
	// An event from the initial list goes in at low priority, exactly as unwrapped.
	hd.Create(context.Background(), event.CreateEvent{Object: pod("p", "1"), IsInInitialList: true}, q)
	item, prio, _ := q.GetWithPriority()
	if item.Name != "p" || prio != handler.LowPriority {
		t.Fatalf("got %v priority %d", item, prio)
	}
	q.Done(item)
	expect(t, l.got(), "c map p -> ns/p (object)", "c enqueue ns/p new from p after 0s")
}

func TestControllerOwnerMiss(t *testing.T) {
	want := schema.GroupKind{Group: "ray.io", Kind: "RayCluster"}
	cases := []struct {
		owners []metav1.OwnerReference
		reason string
	}{
		{nil, "no controller owner"},
		{[]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "a"}}, "no controller owner"},
		{[]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", Controller: ptr.To(true)}}, "controller owner is Job j, not a RayCluster"},
	}
	for _, c := range cases {
		if got := controllerOwnerMiss(want, pod("p", "1", c.owners...)); !strings.HasPrefix(got, c.reason) {
			t.Errorf("owners %v: %q, want %q", c.owners, got, c.reason)
		}
	}
}

func TestHookedQueueClassifiesAdds(t *testing.T) {
	l := &log{}
	h := New("c", l)
	opts := h.ControllerOptions(controller.Options{MaxConcurrentReconciles: 2})
	q := opts.NewQueue("c", opts.RateLimiter)
	defer q.ShutDown()
	hd := h.Handler("object", &handler.EnqueueRequestForObject{})
	ctx := context.Background()
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}

	hd.Create(ctx, event.CreateEvent{Object: pod("p", "1")}, q)
	hd.Update(ctx, event.UpdateEvent{ObjectOld: pod("p", "1"), ObjectNew: pod("p", "2")}, q)
	if st := h.Stats(); st.Depth != 1 || st.Concurrency != 2 {
		t.Fatalf("stats %+v, want depth 1 of concurrency 2", st)
	}
	item, _ := q.Get()
	if st := h.Stats(); st.Busy != 1 || st.Depth != 0 {
		t.Fatalf("stats %+v, want one busy", st)
	}
	// The controller's own requeues: after an error (rate-limited) and a RequeueAfter.
	q.AddRateLimited(item)
	q.Done(item)
	item, _ = q.Get()
	q.AddAfter(item, time.Hour)
	q.Done(item)
	// A handler add while the key waits for its RequeueAfter makes it ready now.
	hd.Update(ctx, event.UpdateEvent{ObjectOld: pod("p", "2"), ObjectNew: pod("p", "3")}, q)
	if got, _ := q.Get(); got != key {
		t.Fatalf("got %v", got)
	}
	expect(t, l.got(),
		"c map p -> ns/p (object)", "c enqueue ns/p new from p after 0s",
		"c map p -> ns/p (object)", "c enqueue ns/p coalesced from p after 0s",
		"c dequeue ns/p",
		"c enqueue ns/p rate-limited from self after 5ms",
		"c dequeue ns/p",
		"c enqueue ns/p requeue-after from self after 1h0m0s",
		"c map p -> ns/p (object)", "c enqueue ns/p advanced from p after 0s",
		"c dequeue ns/p",
	)
}

func TestReconcileAttributesWritesAndCalls(t *testing.T) {
	l := &log{}
	h := New("c", l)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer srv.Close()
	hc := &http.Client{Transport: Transport(nil)}
	boom := errors.New("boom")
	r := h.Reconciler(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj := pod("other-name", "9")
		h.StatusWritten(ctx, obj, chain.F("state", "ready"))
		h.Transition(ctx, obj, "Initializing", "Running")
		req2, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/jobs/", nil)
		resp, err := hc.Do(req2)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return reconcile.Result{RequeueAfter: time.Second}, boom
	}))
	key := types.NamespacedName{Namespace: "ns", Name: "x"}
	h.dequeued(key, 0) // a worker took the key: the pass the writes and calls belong to
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
	if res.RequeueAfter != time.Second || err != boom {
		t.Fatalf("result changed: %v %v", res, err)
	}
	// Outside a reconcile the transport reports nothing.
	resp, err := hc.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	expect(t, l.got(),
		"c dequeue ns/x",
		"c start ns/x",
		"c status other-name by ns/x: [{state ready}]",
		"c transition other-name Initializing->Running",
		"c call POST /api/jobs/ 418 by ns/x",
		"c end ns/x after=1s err=boom ignored=true",
	)
}
