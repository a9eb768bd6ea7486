package chain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
)

// passes numbers reconcile passes across the test's controllers, as chainhooks does.
var passes uint64

// ctl records one controller's hops as chainhooks emits them.
type ctl struct {
	r      *Recorder
	name   string
	kind   string
	active map[string]uint64
}

func newCtl(r *Recorder, name, kind string) *ctl {
	return &ctl{r: r, name: name, kind: kind, active: map[string]uint64{}}
}

func (c *ctl) key(name string) Ref { return Ref{Kind: c.kind, Namespace: "ns", Name: name} }

func (c *ctl) emit(e Event) { e.Component = c.name; c.r.Record(e) }

func (c *ctl) event(obj Ref, oldRV string) {
	c.emit(Event{Hop: InformerEvent, Object: obj, OldResourceVersion: oldRV, Outcome: Update})
}

func (c *ctl) mapTo(from Ref, key, reason string) {
	to := c.key(key)
	c.emit(Event{Hop: MapHop, Object: from, To: &to, Reason: reason})
}

func (c *ctl) miss(from Ref, reason string) {
	c.emit(Event{Hop: MapMiss, Object: from, Reason: reason})
}

func (c *ctl) enqueue(key string, from *Ref, kind Outcome, after time.Duration) {
	c.emit(Event{Hop: EnqueueHop, Object: c.key(key), From: from, Outcome: kind, Duration: after})
}

func (c *ctl) dequeue(key string, wait time.Duration) {
	passes++
	c.active[key] = passes
	c.emit(Event{Hop: DequeueHop, Object: c.key(key), Duration: wait, Reconcile: passes})
}

func (c *ctl) start(key string) {
	c.emit(Event{Hop: ReconcileStart, Object: c.key(key), Reconcile: c.active[key]})
}

func (c *ctl) status(key string, obj Ref, fields ...Field) {
	c.emit(Event{Hop: StatusWrite, Object: obj, Status: fields, Reconcile: c.active[key]})
}

func (c *ctl) write(key string, obj Ref, verb Outcome) {
	c.emit(Event{Hop: ObjectWrite, Object: obj, Outcome: verb, Reconcile: c.active[key]})
}

func (c *ctl) call(key, method, url string, code int) {
	c.emit(Event{Hop: DashboardCall, Object: c.key(key), Call: &Call{Method: method, URL: url, Code: code}, Reconcile: c.active[key]})
}

func (c *ctl) end(key string, err error) {
	e := Event{Hop: ReconcileEnd, Object: c.key(key), Duration: time.Millisecond, Reconcile: c.active[key], Outcome: Done, Result: &Result{}}
	if err != nil {
		e.Outcome, e.Error = Failed, err.Error()
	}
	c.emit(e)
	delete(c.active, key)
}

func TestRingKeepsTheNewest(t *testing.T) {
	r := New(3)
	for i := 0; i < 5; i++ {
		r.Record(Event{Component: "c", Hop: EnqueueHop, Object: Ref{Kind: "RayCluster", Name: string(rune('a' + i))}})
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

// The ring grows as events come (past its first allocation) and, once full, keeps the newest in order.
func TestRingGrowsThenWraps(t *testing.T) {
	const size = 1000
	r := New(size)
	for i := 1; i <= 2*size+7; i++ {
		r.Record(Event{Component: "c", Hop: EnqueueHop, Object: Ref{Kind: "RayCluster", Name: "x"}})
		got := r.Events(Filter{})
		want := min(i, size)
		if len(got) != want || got[0].Seq != uint64(i-want+1) || got[len(got)-1].Seq != uint64(i) {
			t.Fatalf("after %d events: kept %d, seqs %d..%d; want %d, %d..%d", i, len(got), got[0].Seq, got[len(got)-1].Seq, want, i-want+1, i)
		}
	}
	if r.Size() != size {
		t.Fatalf("Size() = %d, want %d", r.Size(), size)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *Recorder
	r.Record(Event{Hop: KubeletWrite})
	r.Register(ControllerInfo{Name: "c"}, nil)
	if r.Events(Filter{}) != nil || r.Controllers() != nil {
		t.Fatal("a nil recorder returned events")
	}
}

func TestSubscriptionSeesNewEvents(t *testing.T) {
	r := New(10)
	s := r.Subscribe(1)
	defer s.Close()
	r.Record(Event{Hop: MapHop})
	r.Record(Event{Hop: MapHop}) // the buffer holds one; this one is dropped
	if e := <-s.C(); e.Seq != 1 {
		t.Fatalf("got %+v", e)
	}
	if s.Dropped() != 1 {
		t.Fatalf("dropped %d", s.Dropped())
	}
}

// chainOf records, through the recorder's own adapters, the chain of one head Pod becoming ready:
// kubelet write → API → informer → map → enqueue → dequeue → reconcile → status write → API, then the
// RayJob controller's side up to the submission. A requeue of the RayJob merges into its queue entry.
func chainOf(t *testing.T) *Recorder {
	t.Helper()
	r := New(100)
	rc, rj := newCtl(r, "raycluster", "RayCluster"), newCtl(r, "rayjob", "RayJob")
	pod := Ref{Kind: "Pod", Namespace: "ns", Name: "c-head-x", ResourceVersion: "10"}
	cluster := Ref{Kind: "RayCluster", Namespace: "ns", Name: "c", ResourceVersion: "11"}
	job := Ref{Kind: "RayJob", Namespace: "ns", Name: "j", ResourceVersion: "12"}
	api := func(ref Ref) {
		r.Record(Event{Component: "apiserver", Hop: APIWrite, Object: ref, Outcome: "update status", Call: &Call{Verb: "update", Subresource: "status", Code: 200}})
	}

	rj.enqueue("j", nil, EnqueueRequeueAfter, 3*time.Second)
	r.Record(Event{Component: "kubelet", Hop: KubeletWrite, Object: pod, Pod: &PodStatus{Ready: "True"}})
	api(pod)
	rc.event(pod, "9")
	rc.mapTo(pod, "c", "controller owner")
	rc.enqueue("c", &pod, EnqueueNew, 0)
	rc.dequeue("c", time.Millisecond)
	rc.start("c")
	rc.status("c", cluster, F("state", "ready"))
	api(cluster)
	rc.end("c", nil)
	rj.event(cluster, "8")
	rj.mapTo(cluster, "j", "controller owner")
	rj.enqueue("j", &cluster, EnqueueAdvanced, 0)
	rj.dequeue("j", 0)
	rj.start("j")
	rj.status("j", job, F("jobDeploymentStatus", "Running"))
	rj.call("j", "POST", "http://10.0.0.1:8265/api/jobs/", 200)
	rj.end("j", errors.New("boom"))
	// Noise: another Pod's event that maps to nothing.
	rc.miss(Ref{Kind: "Pod", Namespace: "ns", Name: "stray"}, "no controller owner")
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
	if e := steps[len(steps)-1]; !strings.Contains(render.Describe(&e.Event), "failed") {
		t.Errorf("an erroring reconcile reads %q", render.Describe(&e.Event))
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
	render.Render(&b, Trace(r.Events(Filter{}), "RayJob", "ns", "j"), render.Options{})
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
	rc := newCtl(r, "raycluster", "RayCluster")
	cluster := Ref{Kind: "RayCluster", Namespace: "ns", Name: "c", ResourceVersion: "20"}
	worker := Ref{Kind: "Pod", Namespace: "ns", Name: "c-g-worker-x", ResourceVersion: "21"}
	r.Record(Event{Component: "apiserver", Hop: APIWrite, Object: cluster, Outcome: "patch", Call: &Call{Verb: "patch", User: "system:serviceaccount:ns:c", Code: 200}})
	rc.event(cluster, "19")
	rc.mapTo(cluster, "c", "object")
	rc.enqueue("c", &cluster, EnqueueNew, 0)
	rc.dequeue("c", 0)
	rc.start("c")
	rc.write("c", worker, Create)
	r.Record(Event{Component: "apiserver", Hop: APIWrite, Object: worker, Outcome: "create", Call: &Call{Verb: "create", User: "rayctl:controllers", Code: 201}})
	rc.end("c", nil)
	ready := worker
	ready.ResourceVersion = "25"
	r.Record(Event{Component: "kubelet", Hop: KubeletWrite, Object: ready, Pod: &PodStatus{Ready: "True"}})
	r.Record(Event{Component: "apiserver", Hop: APIWrite, Object: ready, Outcome: "patch status", Call: &Call{Verb: "patch", Subresource: "status", Code: 200}})

	steps := Trace(r.Events(Filter{}), "pod", "ns", worker.Name)
	var hops []string
	for _, s := range steps {
		hops = append(hops, s.Component+" "+string(s.Hop)+" "+render.Describe(&s.Event))
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

// A RayService moving traffic: its reconcile writes the HTTPRoute, rayctl's Gateway controller sees the
// route, reprograms its proxy's table and writes the route's status; a later pass writes the RayService's
// status. Its trace holds the route write and the Gateway's hops it caused.
func TestTraceOfRayServiceFollowsItsRouteWrite(t *testing.T) {
	r := New(100)
	rs, gw := newCtl(r, "rayservice", "RayService"), newCtl(r, "gateway", "Gateway")
	route := Ref{Kind: "HTTPRoute", Namespace: "ns", Name: "s-httproute", ResourceVersion: "20"}
	routeStatus := Ref{Kind: "HTTPRoute", Namespace: "ns", Name: "s-httproute", ResourceVersion: "22"}
	table := Ref{Kind: "ConfigMap", Namespace: "ns", Name: "s-gateway-rayctl", ResourceVersion: "21"}
	svc := Ref{Kind: "RayService", Namespace: "ns", Name: "s", ResourceVersion: "23"}
	api := func(ref Ref, verb string) {
		r.Record(Event{Component: "apiserver", Hop: APIWrite, Object: ref, Outcome: Outcome(verb), Call: &Call{Verb: verb, Code: 200}})
	}
	rs.enqueue("s", nil, EnqueueRequeueAfter, time.Second)
	rs.dequeue("s", 0)
	rs.start("s")
	rs.write("s", route, Update)
	api(route, "update")
	rs.end("s", nil)
	gw.event(route, "19")
	gw.mapTo(route, "s-gateway", "route's parent gateway")
	gw.enqueue("s-gateway", &route, EnqueueNew, 0)
	gw.dequeue("s-gateway", 0)
	gw.start("s-gateway")
	gw.write("s-gateway", table, Update)
	gw.status("s-gateway", routeStatus, F("accepted", "True/Accepted"))
	api(routeStatus, "update")
	gw.end("s-gateway", nil)
	rs.enqueue("s", nil, EnqueueRequeueAfter, time.Second)
	rs.dequeue("s", 0)
	rs.start("s")
	rs.status("s", svc, F("serviceStatus", "Running"))
	rs.end("s", nil)

	var hops []string
	for _, s := range Trace(r.Events(Filter{}), "rayservice", "ns", "s") {
		hops = append(hops, s.Component+" "+string(s.Hop)+" "+s.Object.Kind)
	}
	got := strings.Join(hops, "\n")
	for _, want := range []string{"rayservice controller-write HTTPRoute", "gateway informer HTTPRoute", "gateway reconcile-start Gateway",
		"gateway controller-write ConfigMap", "gateway status-write HTTPRoute", "rayservice status-write RayService"} {
		if !strings.Contains(got, want) {
			t.Errorf("the RayService's trace lacks %q:\n%s", want, got)
		}
	}
}
