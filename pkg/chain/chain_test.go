package chain

import (
	"errors"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
)

func TestRingKeepsTheNewest(t *testing.T) {
	r := New(3)
	for i := 0; i < 5; i++ {
		r.record(Event{Component: "c", Hop: EnqueueHop, Object: Ref{Kind: "RayCluster", Name: string(rune('a' + i))}})
	}
	got := r.Events(Filter{})
	if len(got) != 3 || got[0].Seq != 3 || got[2].Seq != 5 || got[2].Object.Name != "e" {
		t.Fatalf("kept %+v", got)
	}
	if got := r.Events(Filter{After: 4}); len(got) != 1 || got[0].Seq != 5 {
		t.Fatalf("after 4: %+v", got)
	}
	if got := r.Events(Filter{Kind: "raycluster", Name: "d"}); len(got) != 1 {
		t.Fatalf("by name: %+v", got)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *Recorder
	r.KubeletWrote(nil, "1")
	obs := r.Observer()
	obs.OnEvent("c", Ref{}, "", chainhooks.Update)
	if r.Events(Filter{}) != nil {
		t.Fatal("a nil recorder returned events")
	}
}

func TestSubscriptionSeesNewEvents(t *testing.T) {
	r := New(10)
	s := r.Subscribe(1)
	defer s.Close()
	r.record(Event{Hop: MapHop})
	r.record(Event{Hop: MapHop}) // the buffer holds one; this one is dropped
	if e := <-s.C(); e.Seq != 1 {
		t.Fatalf("got %+v", e)
	}
	if s.Dropped() != 1 {
		t.Fatalf("dropped %d", s.Dropped())
	}
}

func TestAuditBackendRecordsAcceptedWrites(t *testing.T) {
	r := New(10)
	b := r.AuditBackend()
	received := metav1.NewMicroTime(time.Now().Add(-3 * time.Millisecond))
	ok := b.ProcessEvents(&auditinternal.Event{
		Stage: auditinternal.StageResponseComplete, Verb: "patch",
		User:           authnv1.UserInfo{Username: "system:node:vm"},
		ObjectRef:      &auditinternal.ObjectReference{Resource: "pods", Subresource: "status", Namespace: "ns", Name: "p"},
		ResponseStatus: &metav1.Status{Code: 200}, RequestReceivedTimestamp: received, StageTimestamp: metav1.NewMicroTime(time.Now()),
		ResponseObject: &runtime.Unknown{Raw: []byte(`{"kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"42"}}`)},
	}, &auditinternal.Event{
		Stage: auditinternal.StageResponseComplete, Verb: "update",
		ObjectRef:      &auditinternal.ObjectReference{Resource: "rayclusters", Subresource: "status", Namespace: "ns", Name: "c"},
		ResponseStatus: &metav1.Status{Code: 409, Message: "the object has been modified"},
	})
	if !ok {
		t.Fatal("the backend refused events (the request would fail)")
	}
	got := r.Events(Filter{})
	if len(got) != 2 {
		t.Fatalf("recorded %+v", got)
	}
	if e := got[0]; e.Object.Kind != "Pod" || e.Object.ResourceVersion != "42" || e.Object.UID != "u1" || e.Outcome != "patch status" ||
		e.Detail != "system:node:vm" || e.Duration < 3*time.Millisecond {
		t.Errorf("accepted write: %+v", e)
	}
	if e := got[1]; e.Code != 409 || e.Object.Kind != "RayCluster" || !strings.Contains(Describe(&e), "refused") {
		t.Errorf("refused write: %+v (%s)", e, Describe(&e))
	}
}

// chainOf records, through the recorder's own adapters, the chain of one head Pod becoming ready:
// kubelet write → API → informer → map → enqueue → dequeue → reconcile → status write → API, then the
// RayJob controller's side up to the submission. A requeue of the RayJob merges into its queue entry.
func chainOf(t *testing.T) *Recorder {
	t.Helper()
	r := New(100)
	r.Register(ControllerInfo{Name: "raycluster", Kind: "RayCluster"}, nil)
	r.Register(ControllerInfo{Name: "rayjob", Kind: "RayJob"}, nil)
	o := r.Observer()
	pod := Ref{Kind: "Pod", Namespace: "ns", Name: "c-head-x", ResourceVersion: "10"}
	cluster := Ref{Kind: "RayCluster", Namespace: "ns", Name: "c", ResourceVersion: "11"}
	job := Ref{Kind: "RayJob", Namespace: "ns", Name: "j", ResourceVersion: "12"}
	ckey := types.NamespacedName{Namespace: "ns", Name: "c"}
	jkey := types.NamespacedName{Namespace: "ns", Name: "j"}
	api := func(ref Ref) {
		r.record(Event{Component: "apiserver", Hop: APIWrite, Object: ref, Outcome: "update status", Code: 200})
	}

	o.OnEnqueue("rayjob", chainhooks.Enqueue{Key: jkey, Kind: chainhooks.EnqueueRequeueAfter, After: 3 * time.Second})
	r.record(Event{Component: "kubelet", Hop: KubeletWrite, Object: pod, Detail: "Ready=True"})
	api(pod)
	o.OnEvent("raycluster", pod, "9", chainhooks.Update)
	o.OnMap("raycluster", pod, ckey, "controller owner")
	o.OnEnqueue("raycluster", chainhooks.Enqueue{Key: ckey, From: &pod, Kind: chainhooks.EnqueueNew})
	o.OnDequeue("raycluster", ckey, time.Millisecond)
	o.OnReconcileStart("raycluster", ckey)
	o.OnStatusWrite("raycluster", ckey, cluster, "state=ready")
	api(cluster)
	o.OnReconcileEnd("raycluster", ckey, reconcile.Result{RequeueAfter: 2 * time.Second}, nil, 3*time.Millisecond)
	o.OnEvent("rayjob", cluster, "8", chainhooks.Update)
	o.OnMap("rayjob", cluster, jkey, "controller owner")
	o.OnEnqueue("rayjob", chainhooks.Enqueue{Key: jkey, From: &cluster, Kind: chainhooks.EnqueueAdvanced})
	o.OnDequeue("rayjob", jkey, 0)
	o.OnReconcileStart("rayjob", jkey)
	o.OnStatusWrite("rayjob", jkey, job, "jobDeploymentStatus=Running")
	o.OnCall("rayjob", jkey, chainhooks.Call{Method: "POST", URL: "http://10.0.0.1:8265/api/jobs/", Code: 200})
	o.OnReconcileEnd("rayjob", jkey, reconcile.Result{}, errors.New("boom"), time.Millisecond)
	// Noise: another Pod's event that maps to nothing.
	o.OnMapMiss("raycluster", Ref{Kind: "Pod", Namespace: "ns", Name: "stray"}, "no controller owner")
	return r
}

func TestTraceLinksSubmissionBackToKubeletWrite(t *testing.T) {
	r := chainOf(t)
	steps := Trace(r.Events(Filter{}), "rayjob", "ns", "j")
	var hops []string
	for _, s := range steps {
		hops = append(hops, s.Component+" "+string(s.Hop))
	}
	want := []string{
		"rayjob enqueue", // the requeue merged into the submitting pass, kept as a leaf
		"kubelet kubelet-write", "apiserver api-write", "raycluster informer", "raycluster map", "raycluster enqueue",
		"raycluster dequeue", "raycluster reconcile-start", "raycluster status-write", "apiserver api-write",
		"raycluster reconcile-end", "rayjob informer", "rayjob map", "rayjob enqueue", "rayjob dequeue",
		"rayjob reconcile-start", "rayjob status-write", "rayjob dashboard-call", "rayjob reconcile-end",
	}
	if strings.Join(hops, ", ") != strings.Join(want, ", ") {
		t.Fatalf("trace:\n  %s\nwant:\n  %s", strings.Join(hops, "\n  "), strings.Join(want, "\n  "))
	}
	bySeq := map[uint64]Step{}
	for _, s := range steps {
		bySeq[s.Seq] = s
	}
	s := steps[len(steps)-2] // the dashboard call
	n := 0
	for s.Cause != 0 {
		s = bySeq[s.Cause]
		n++
	}
	if s.Hop != KubeletWrite || n != 14 {
		t.Errorf("causes from the submission end at %s after %d hops, want the kubelet write after 14", s.Hop, n)
	}
	if e := steps[len(steps)-1]; !strings.Contains(Describe(&e.Event), "failed") {
		t.Errorf("an erroring reconcile reads %q", Describe(&e.Event))
	}
}

func TestTraceOfPodFollowsItsEffects(t *testing.T) {
	r := chainOf(t)
	steps := Trace(r.Events(Filter{}), "Pod", "ns", "c-head-x")
	if len(steps) == 0 || steps[0].Hop != KubeletWrite {
		t.Fatalf("trace starts with %+v", steps)
	}
	last := steps[len(steps)-1]
	if last.Component != "rayjob" || last.Hop != ReconcileEnd {
		t.Errorf("the Pod's trace ends at %s %s, want the RayJob's reconcile", last.Component, last.Hop)
	}
}

func TestRenderFitsEightyColumns(t *testing.T) {
	r := chainOf(t)
	var b strings.Builder
	Render(&b, Trace(r.Events(Filter{}), "RayJob", "ns", "j"), RenderOptions{})
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	if !strings.Contains(b.String(), "dashboard POST") {
		t.Errorf("no dashboard call in\n%s", b.String())
	}
}

// TestTraceOfAPodStartsAtTheWriteThatMadeIt: an autoscaler's patch of a RayCluster (a write by an
// identity other than the controllers') → informer → Reconcile → the controller's create of a worker
// Pod → the API server's create, then the Pod's kubelet write: `rayctl trace pod/…` shows it all.
func TestTraceOfAPodStartsAtTheWriteThatMadeIt(t *testing.T) {
	r := New(100)
	r.Register(ControllerInfo{Name: "raycluster", Kind: "RayCluster"}, nil)
	o := r.Observer()
	cluster := Ref{Kind: "RayCluster", Namespace: "ns", Name: "c", ResourceVersion: "20"}
	worker := Ref{Kind: "Pod", Namespace: "ns", Name: "c-g-worker-x", ResourceVersion: "21"}
	ckey := types.NamespacedName{Namespace: "ns", Name: "c"}
	r.record(Event{Component: "apiserver", Hop: APIWrite, Object: cluster, Outcome: "patch", Detail: "system:serviceaccount:ns:c", Code: 200})
	o.OnEvent("raycluster", cluster, "19", chainhooks.Update)
	o.OnMap("raycluster", cluster, ckey, "object")
	o.OnEnqueue("raycluster", chainhooks.Enqueue{Key: ckey, From: &cluster, Kind: chainhooks.EnqueueNew})
	o.OnDequeue("raycluster", ckey, 0)
	o.OnReconcileStart("raycluster", ckey)
	o.OnWrite("raycluster", ckey, worker, "create")
	r.record(Event{Component: "apiserver", Hop: APIWrite, Object: worker, Outcome: "create", Detail: "rayctl:controllers", Code: 201})
	o.OnReconcileEnd("raycluster", ckey, reconcile.Result{}, nil, time.Millisecond)
	ready := worker
	ready.ResourceVersion = "25"
	r.record(Event{Component: "kubelet", Hop: KubeletWrite, Object: ready, Detail: "Ready=True"})
	r.record(Event{Component: "apiserver", Hop: APIWrite, Object: ready, Outcome: "patch status", Code: 200})

	steps := Trace(r.Events(Filter{}), "pod", "ns", worker.Name)
	var hops []string
	for _, s := range steps {
		hops = append(hops, s.Component+" "+string(s.Hop)+" "+Describe(&s.Event))
	}
	got := strings.Join(hops, "\n")
	for _, want := range []string{"apiserver api-write", "system:serviceaccount:ns:c", "raycluster reconcile-start",
		"raycluster controller-write created Pod c-g-worker-x", "kubelet kubelet-write"} {
		if !strings.Contains(got, want) {
			t.Errorf("trace lacks %q:\n%s", want, got)
		}
	}
	if i, j := strings.Index(got, "system:serviceaccount"), strings.Index(got, "controller-write"); i < 0 || j < i {
		t.Errorf("the autoscaler's patch does not come before the Pod's creation:\n%s", got)
	}
}
