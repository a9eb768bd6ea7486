package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
)

// `rayctl trace pod/NAME --follow -o json` prints the trace kept so far, then the hops of each later
// kubelet write as the recorder takes them, each step once.
func TestFollowTracePrintsNewHopsOnce(t *testing.T) {
	rec := chain.New(100)
	podWrite := func(rv string) {
		pod := chain.Ref{Kind: chain.KindPod, Namespace: "ns", Name: "p", ResourceVersion: rv}
		rec.Record(chain.Event{Component: "kubelet", Hop: chain.KubeletWrite, Object: pod, Outcome: "Running", Pod: &chain.PodStatus{Phase: "Running", Ready: "True"}})
		rec.Record(chain.Event{Component: "apiserver", Hop: chain.APIWrite, Object: pod, Outcome: "patch status",
			Call: &chain.Call{Verb: "patch", Subresource: "status", Code: 200}})
	}
	podWrite("10")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- followTrace(ctx, w, rec.Source(), chain.Trace, chain.KindPod, "ns", "p", true, render.Options{})
		w.Close()
	}()
	lines := bufio.NewScanner(r)
	next := func() chain.Step {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("output ended: %v", lines.Err())
		}
		var s chain.Step
		if err := json.Unmarshal(lines.Bytes(), &s); err != nil {
			t.Fatalf("%q: %v", lines.Text(), err)
		}
		return s
	}
	for _, want := range []uint64{1, 2} {
		if s := next(); s.Seq != want {
			t.Fatalf("kept trace: step seq %d, want %d", s.Seq, want)
		}
	}
	podWrite("11")
	for _, want := range []uint64{3, 4} {
		if s := next(); s.Seq != want || s.Object.ResourceVersion != "11" {
			t.Fatalf("followed: step seq %d rv %s, want seq %d of rv 11", s.Seq, s.Object.ResourceVersion, want)
		}
	}
	cancel()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	if err := <-done; err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}
