package render

import (
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/chain"
)

// TestDescribeEachHop: each hop's typed fields read as the one line rayctl trace prints.
func TestDescribeEachHop(t *testing.T) {
	pod := chain.Ref{Kind: "Pod", Namespace: "ns", Name: "c-head-x", ResourceVersion: "7"}
	rc := chain.Ref{Kind: "RayCluster", Namespace: "ns", Name: "c"}
	job := chain.Ref{Kind: "RayJob", Namespace: "ns", Name: "j", ResourceVersion: "9"}
	cases := []struct {
		e    chain.Event
		want string
	}{
		{chain.Event{Hop: chain.KubeletWrite, Object: pod, Outcome: "Running", Pod: &chain.PodStatus{Phase: "Running", Ready: "False",
			Containers: []chain.ContainerState{{Name: "ray-head", State: chain.Running}, {Name: "init", State: chain.Waiting, Reason: "PodInitializing"}}}},
			"wrote Pod c-head-x status: Running Ready=False ray-head=running,not-ready init=PodInitializing rv 7"},
		{chain.Event{Hop: chain.APIWrite, Object: pod, Outcome: "patch status", Call: &chain.Call{Verb: "patch", Subresource: "status", User: "system:node:vm", Code: 200}},
			"accepted patch status of Pod c-head-x rv 7 (system:node:vm)"},
		{chain.Event{Hop: chain.APIWrite, Object: rc, Outcome: "update status", Error: "conflict", Call: &chain.Call{Code: 409, User: "rayctl:controllers"}},
			"refused update status of RayCluster c: 409 conflict (rayctl:controllers)"},
		{chain.Event{Hop: chain.PredicateHop, Object: rc, Outcome: chain.Dropped, Predicate: "generation changed"},
			`predicate "generation changed" dropped RayCluster c`},
		{chain.Event{Hop: chain.MapHop, Object: pod, To: &rc, Reason: "controller owner"},
			"mapped Pod c-head-x → RayCluster c (controller owner)"},
		{chain.Event{Hop: chain.MapMiss, Object: pod, Reason: "no controller owner"}, "not mapped: Pod c-head-x: no controller owner"},
		{chain.Event{Hop: chain.ReconcileEnd, Object: rc, Reconcile: 3, Outcome: chain.RequeueAfter, Duration: time.Millisecond,
			Result: &chain.Result{RequeueAfter: 2 * time.Second}}, "Reconcile RayCluster c #3 done in 1.0 ms, requeue after 2s"},
		{chain.Event{Hop: chain.ReconcileEnd, Object: rc, Reconcile: 4, Outcome: chain.Failed, Error: "boom", Duration: time.Millisecond,
			Result: &chain.Result{RequeueAfter: 2 * time.Second, RequeueAfterIgnored: true}},
			"Reconcile RayCluster c #4 failed in 1.0 ms: boom (RequeueAfter 2s ignored: an error goes to the rate limiter)"},
		{chain.Event{Hop: chain.StatusWrite, Object: job, Status: []chain.Field{chain.F("jobDeploymentStatus", "Running"), chain.F("jobStatus", "")}},
			"wrote RayJob j status: jobDeploymentStatus=Running jobStatus= rv 9"},
		{chain.Event{Hop: chain.Transition, Object: job, Outcome: "Running", Change: &chain.Change{From: "Initializing", To: "Running"}},
			"RayJob j moved Initializing → Running"},
		{chain.Event{Hop: chain.DashboardCall, Object: job, Duration: time.Millisecond,
			Call: &chain.Call{Method: "POST", URL: "http://10.0.0.1:8265/api/jobs/", Path: "/api/jobs/", Code: 200}},
			"dashboard POST http://10.0.0.1:8265/api/jobs/ → 200 in 1.0 ms"},
		{chain.Event{Hop: chain.WatchDelivery, Object: pod, Outcome: chain.Update, Call: &chain.Call{Verb: "watch", User: "kuberay-operator", UserAgent: "kuberay-operator/v1.6.2"}},
			"delivered update of Pod c-head-x rv 7 to the watch of kuberay-operator, kuberay-operator/v1.6.2"},
	}
	for _, c := range cases {
		if got := Describe(&c.e); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.e.Hop, got, c.want)
		}
	}
}

func TestWrapKeepsWidth(t *testing.T) {
	for _, l := range Wrap(strings.Repeat("word ", 40), 30) {
		if len([]rune(l)) > 30 {
			t.Errorf("%q is wider than 30", l)
		}
	}
}
