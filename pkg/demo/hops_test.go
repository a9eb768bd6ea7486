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

// TestStreamShowsDeliveriesToAnOperatorOnly: a watch event delivered to an operator outside rayctl
// that wrote next is a line; one to rayctl's controllers (their informer hops show it), to a node or
// to a mere watcher is not.
func TestStreamShowsDeliveriesToAnOperatorOnly(t *testing.T) {
	var b strings.Builder
	s := newDemoStream(&b, render.Options{Width: 200}, "j")
	pod := chain.Ref{Kind: "Pod", Namespace: "demo", Name: "j-abcde-head-x", ResourceVersion: "10"}
	deliver := func(seq uint64, user string) chain.Event {
		return chain.Event{Seq: seq, Mono: int64(seq), Component: "apiserver", Hop: chain.WatchDelivery, Outcome: chain.Update, Object: pod,
			Call: &chain.Call{Verb: "watch", User: user}}
	}
	for _, e := range []chain.Event{
		deliver(1, "kuberay-operator"), deliver(2, "rayctl:controllers"), deliver(3, "kubectl-watcher"), deliver(6, "system:node:vm"),
		{Seq: 4, Mono: 4, Component: "apiserver", Hop: chain.APIWrite, Outcome: "update status", Object: chain.Ref{Kind: "RayCluster", Namespace: "demo", Name: "j-abcde", ResourceVersion: "11"},
			Call: &chain.Call{Verb: "update", Subresource: "status", User: "kuberay-operator", Code: 200}},
		{Seq: 5, Mono: 5, Component: "apiserver", Hop: chain.APIWrite, Outcome: "update status", Object: chain.Ref{Kind: "RayJob", Namespace: "demo", Name: "j", ResourceVersion: "12"},
			Call: &chain.Call{Verb: "update", Subresource: "status", User: "rayctl:controllers", Code: 200}},
	} {
		s.add(e, time.Now())
	}
	s.flush(time.Now(), true)
	out := b.String()
	if !strings.Contains(out, "to the watch of kuberay-operator") {
		t.Errorf("the delivery to the operator is not shown:\n%s", out)
	}
	for _, hidden := range []string{"to the watch of rayctl:controllers", "to the watch of kubectl-watcher", "to the watch of system:node:vm"} {
		if strings.Contains(out, hidden) {
			t.Errorf("the stream shows %q:\n%s", hidden, out)
		}
	}
}
