package chain_test

import (
	"testing"
	"time"

	. "github.com/rayctl/rayctl/pkg/chain"
)

// TestTimelineAndPath: a kubelet write that makes a RayCluster reconcile and write its status, with a
// periodic requeue of another key in between; Path from the status write walks back to the kubelet's
// write through every hop, and Timeline gives each event its cause.
func TestTimelineAndPath(t *testing.T) {
	r := New(100)
	rc := newCtl(r, "raycluster", "RayCluster")
	pod := Ref{Kind: "Pod", Namespace: "ns", Name: "c-head-x", ResourceVersion: "7"}

	r.Record(Event{Component: "kubelet", Hop: KubeletWrite, Object: pod, Outcome: "Running", Pod: &PodStatus{Phase: "Running", Ready: "True"}})
	r.Record(Event{Component: "apiserver", Hop: APIWrite, Object: pod, Outcome: "patch status", Call: &Call{Verb: "patch", Subresource: "status", Code: 200}, Duration: time.Millisecond})
	rc.enqueue("other", nil, EnqueueRequeueAfter, time.Second)
	rc.event(pod, "6")
	rc.mapTo(pod, "c", "controller owner")
	rc.enqueue("c", &pod, EnqueueNew, 0)
	rc.dequeue("c", 100*time.Microsecond)
	rc.start("c")
	rc.status("c", Ref{Kind: "RayCluster", Namespace: "ns", Name: "c", ResourceVersion: "8"}, F("state", "ready"))
	events := r.Events(Filter{})

	var status uint64
	for _, e := range events {
		if e.Hop == StatusWrite {
			status = e.Seq
		}
	}
	path := Path(TraceFrom(events, status), status)
	want := []Hop{KubeletWrite, APIWrite, InformerEvent, MapHop, EnqueueHop, DequeueHop, ReconcileStart, StatusWrite}
	if len(path) != len(want) {
		t.Fatalf("path has %d steps, want %d: %+v", len(path), len(want), path)
	}
	for i, s := range path {
		if s.Hop != want[i] {
			t.Errorf("step %d is %s, want %s", i, s.Hop, want[i])
		}
		if i > 0 && s.Cause != path[i-1].Seq {
			t.Errorf("step %d (%s) has cause %d, want %d", i, s.Hop, s.Cause, path[i-1].Seq)
		}
		if i > 0 && s.At < path[i-1].At {
			t.Errorf("step %d (%s) placed before its cause", i, s.Hop)
		}
	}

	tl := Timeline(events)
	if len(tl) != len(events) {
		t.Fatalf("Timeline has %d steps for %d events", len(tl), len(events))
	}
	for _, s := range tl {
		if s.Hop == EnqueueHop && s.Object.Name == "other" && s.Cause != 0 {
			t.Errorf("the unrelated requeue got cause %d", s.Cause)
		}
		if s.Hop == ReconcileStart && s.Cause == 0 {
			t.Errorf("the reconcile start has no cause")
		}
	}
	if TraceFrom(events, 9999) != nil || Path(tl, 9999) != nil {
		t.Error("an unknown seq gave a trace or a path")
	}
}
