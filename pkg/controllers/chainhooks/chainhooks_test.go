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
)

// log is an Observer that keeps one line per hop.
type log struct {
	mu    sync.Mutex
	lines []string
}

func (l *log) add(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *log) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *log) OnEvent(c string, o Ref, old string, t EventType) {
	l.add("%s event %s %s/%s@%s old=%s", c, t, o.Kind, o.Name, o.ResourceVersion, old)
}
func (l *log) OnPredicate(c string, o Ref, p string, ok bool) {
	l.add("%s predicate %s %v", c, p, ok)
}
func (l *log) OnMap(c string, from Ref, to types.NamespacedName, reason string) {
	l.add("%s map %s -> %s (%s)", c, from.Name, to, reason)
}
func (l *log) OnMapMiss(c string, from Ref, reason string) {
	l.add("%s miss %s: %s", c, from.Name, reason)
}
func (l *log) OnEnqueue(c string, e Enqueue) {
	src := "self"
	if e.From != nil {
		src = e.From.Name
	}
	l.add("%s enqueue %s %s from %s after %s", c, e.Key, e.Kind, src, e.After)
}
func (l *log) OnDequeue(c string, k types.NamespacedName, _ time.Duration) {
	l.add("%s dequeue %s", c, k)
}
func (l *log) OnReconcileStart(c string, k types.NamespacedName) { l.add("%s start %s", c, k) }
func (l *log) OnReconcileEnd(c string, k types.NamespacedName, res reconcile.Result, err error, _ time.Duration) {
	l.add("%s end %s after=%s err=%v", c, k, res.RequeueAfter, err)
}
func (l *log) OnStatusWrite(c string, k types.NamespacedName, o Ref, summary string) {
	l.add("%s status %s by %s: %s", c, o.Name, k, summary)
}
func (l *log) OnTransition(c string, k types.NamespacedName, o Ref, from, to string) {
	l.add("%s transition %s %s->%s", c, o.Name, from, to)
}
func (l *log) OnWrite(c string, k types.NamespacedName, o Ref, verb string) {
	l.add("%s %s %s by %s", c, verb, o.Name, k)
}
func (l *log) OnCall(c string, k types.NamespacedName, call Call) {
	l.add("%s call %s %s %d by %s", c, call.Method, call.URL[strings.LastIndex(call.URL, "/"):], call.Code, k)
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
		h.StatusWritten(ctx, obj, "state=ready")
		h.Transition(ctx, obj, "Initializing", "Running")
		req2, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/jobs/", nil)
		resp, err := hc.Do(req2)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return reconcile.Result{RequeueAfter: time.Second}, boom
	}))
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "x"}})
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
		"c start ns/x",
		"c status other-name by ns/x: state=ready",
		"c transition other-name Initializing->Running",
		"c call POST / 418 by ns/x",
		"c end ns/x after=1s err=boom",
	)
}
