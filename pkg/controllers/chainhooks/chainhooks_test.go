package chainhooks

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type log struct {
	Nop
	mu    sync.Mutex
	lines []string
}

func (l *log) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }

func (l *log) OnEvent(c string, o Ref, t EventType) {
	l.add(c + " event " + string(t) + " " + o.Kind + "/" + o.Name + "@" + o.ResourceVersion)
}
func (l *log) OnPredicate(c string, o Ref, p string, ok bool) {
	l.add(c + " predicate " + p + " " + map[bool]string{true: "pass", false: "drop"}[ok])
}
func (l *log) OnMap(c string, from Ref, to types.NamespacedName, reason string) {
	l.add(c + " map " + from.Name + " -> " + to.String() + " (" + reason + ")")
}
func (l *log) OnEnqueue(c string, k types.NamespacedName, _ time.Duration) {
	l.add(c + " enqueue " + k.String())
}
func (l *log) OnReconcileStart(c string, k types.NamespacedName, _ time.Duration) {
	l.add(c + " start " + k.String())
}
func (l *log) OnReconcileEnd(c string, k types.NamespacedName, _ reconcile.Result, err error, _ time.Duration) {
	l.add(c + " end " + k.String() + " " + errString(err))
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func pod(name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func TestFilterReportsAndKeepsDecisions(t *testing.T) {
	l := &log{}
	h := New("c", l)
	preds := h.Predicates(Named("generation", predicate.GenerationChangedPredicate{}))
	old, cur := pod("p", "1"), pod("p", "2")
	e := event.UpdateEvent{ObjectOld: old, ObjectNew: cur}
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
	want := []string{"c event update Pod/p@2", "c predicate generation drop"}
	if len(l.lines) != 2 || l.lines[0] != want[0] || l.lines[1] != want[1] {
		t.Fatalf("got %q", l.lines)
	}
	// With no predicates the watch lets everything through and only reports the event.
	for _, p := range h.Predicates() {
		if !p.Create(event.CreateEvent{Object: cur}) {
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
	if len(l.lines) != 2 || l.lines[0] != "c map p -> ns/p (object)" || l.lines[1] != "c enqueue ns/p" {
		t.Fatalf("got %q", l.lines)
	}
}

func TestReconcilerPassesThrough(t *testing.T) {
	l := &log{}
	h := New("c", l)
	boom := errors.New("boom")
	r := h.Reconciler(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: time.Second}, boom
	}))
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "x"}})
	if res.RequeueAfter != time.Second || err != boom {
		t.Fatalf("result changed: %v %v", res, err)
	}
	if len(l.lines) != 2 || l.lines[1] != "c end ns/x boom" {
		t.Fatalf("got %q", l.lines)
	}
}
