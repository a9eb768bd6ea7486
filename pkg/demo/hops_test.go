package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
)

// headReadyToSubmission is the chain of one RayJob from its head Pod's Ready write to the POST that
// submits it, as the recorder keeps it.
func headReadyToSubmission() []chain.Event {
	r := chain.New(100)
	pod := chain.Ref{Kind: "Pod", Namespace: "demo", Name: "j-abcde-head-x", ResourceVersion: "10"}
	rc := chain.Ref{Kind: "RayCluster", Namespace: "demo", Name: "j-abcde"}
	rcw := rc
	rcw.ResourceVersion = "11"
	job := chain.Ref{Kind: "RayJob", Namespace: "demo", Name: "j"}
	rec := func(e chain.Event) {
		time.Sleep(50 * time.Microsecond) // distinct monotonic times
		r.Record(e)
	}
	rec(chain.Event{Component: "kubelet", Hop: chain.KubeletWrite, Object: pod, Outcome: "Running", Pod: &chain.PodStatus{Phase: "Running", Ready: "True"}})
	rec(chain.Event{Component: "apiserver", Hop: chain.APIWrite, Object: pod, Outcome: "patch status", Call: &chain.Call{Verb: "patch", Subresource: "status", Code: 200}})
	rec(chain.Event{Component: "raycluster", Hop: chain.InformerEvent, Object: pod, Outcome: "update"})
	rec(chain.Event{Component: "raycluster", Hop: chain.MapHop, Object: pod, To: &rc, Reason: "controller owner"})
	rec(chain.Event{Component: "raycluster", Hop: chain.EnqueueHop, Object: rc, From: &pod, Outcome: chain.EnqueueNew})
	rec(chain.Event{Component: "raycluster", Hop: chain.DequeueHop, Object: rc, Reconcile: 1})
	rec(chain.Event{Component: "raycluster", Hop: chain.ReconcileStart, Object: rc, Reconcile: 1})
	rec(chain.Event{Component: "raycluster", Hop: chain.StatusWrite, Object: rcw, Reconcile: 1, Status: []chain.Field{chain.F("state", "ready")}})
	rec(chain.Event{Component: "apiserver", Hop: chain.APIWrite, Object: rcw, Outcome: "update status", Call: &chain.Call{Verb: "update", Subresource: "status", Code: 200}})
	rec(chain.Event{Component: "rayjob", Hop: chain.InformerEvent, Object: rcw, Outcome: "update"})
	rec(chain.Event{Component: "rayjob", Hop: chain.MapHop, Object: rcw, To: &job, Reason: "controller owner"})
	rec(chain.Event{Component: "rayjob", Hop: chain.EnqueueHop, Object: job, From: &rcw, Outcome: chain.EnqueueNew})
	rec(chain.Event{Component: "rayjob", Hop: chain.DequeueHop, Object: job, Reconcile: 2})
	rec(chain.Event{Component: "rayjob", Hop: chain.ReconcileStart, Object: job, Reconcile: 2})
	rec(chain.Event{Component: "rayjob", Hop: chain.DashboardCall, Object: job, Reconcile: 2, Duration: 10 * time.Microsecond,
		Call: &chain.Call{Method: "POST", URL: "http://10.0.0.1:8265/api/jobs/", Path: "/api/jobs/", Code: 200}})
	rec(chain.Event{Component: "rayjob", Hop: chain.ReconcileEnd, Object: job, Reconcile: 2, Outcome: chain.RequeueAfter,
		Result: &chain.Result{RequeueAfter: 3*time.Second + 123*time.Microsecond}})
	return r.Events(chain.Filter{})
}

// TestHopTableReadsTypedHops: the latency table names its hops from the events' typed fields (the
// Pod's readiness, the status written, the call's method, path and code).
func TestHopTableReadsTypedHops(t *testing.T) {
	var b strings.Builder
	printHopTable(&b, demoStyle{}, headReadyToSubmission(), "demo", "j")
	out := b.String()
	for _, want := range []string{"Hop latencies, head Pod Ready → job submitted", "kubelet wrote Pod status (Ready=True)",
		"kubelet → API accepted (Pod status)", "Reconcile → status write (ready)", "status write → API accepted (RayCluster)",
		"Reconcile → POST /api/jobs/ sent", "POST latency (200)", "head Pod Ready → job submitted:"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// TestStreamShowsTheChain: the live stream prints the hops of the demo's objects with chain/render's
// words, leaving out the enqueue a mapping already says, and rounds a RequeueAfter.
func TestStreamShowsTheChain(t *testing.T) {
	var b strings.Builder
	s := newDemoStream(&b, render.Options{Width: 200}, "j")
	for _, e := range headReadyToSubmission() {
		s.add(e, time.Now())
	}
	s.flush(time.Now(), true)
	out := b.String()
	for _, want := range []string{"wrote Pod j-abcde-head-x status: Running Ready=True", "dashboard POST",
		"requeue after 3s"} {
		if !strings.Contains(out, want) {
			t.Errorf("the stream lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "queued RayCluster") {
		t.Errorf("the stream shows a plain enqueue:\n%s", out)
	}
}
