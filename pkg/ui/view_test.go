package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/chain"
)

// hop is a HopView at t ms.
func hop(seq uint64, t float64, kind, lane, to, label string, cause uint64) HopView {
	return HopView{Seq: seq, at: int64(t * float64(time.Millisecond)), Hop: kind, Lane: lane, To: to, Label: label, Cause: cause}
}

func TestViewOrdersTimesAndLanes(t *testing.T) {
	ready := hop(10, 100, "kubelet-write", "kubelet", "apiserver", "PATCH Pod h status Ready=True", 0)
	ready.Ready = true
	post := hop(17, 130, "dashboard-call", "rayjob", "dashboard", "POST /api/jobs/ → 200", 16)
	post.Method, post.Path, post.Code, post.Duration = "POST", "/api/jobs/", 200, 2
	v := &ChainView{Hops: []HopView{
		post,
		hop(11, 105, "api-write", "apiserver", "apiserver", "accepted patch status Pod h", 10),
		ready,
		hop(12, 106, "informer", "apiserver", "raycluster", "watch update Pod h", 11),
		hop(13, 106, "map", "raycluster", "raycluster", "map Pod h → RayCluster c", 12),
		hop(14, 107, "enqueue", "raycluster", "raycluster", "enqueue RayCluster c (new)", 13),
		hop(15, 108, "dequeue", "raycluster", "raycluster", "queue wait RayCluster c", 14),
		hop(16, 110, "reconcile-start", "rayjob", "rayjob", "Reconcile RayJob j", 15),
		hop(5, 50, "predicate", "endpoints", "endpoints", "predicate dropped Pod h", 0),
	}, Path: []uint64{10, 11, 12, 13, 14, 15, 16, 17}}
	v.finish()
	var order []uint64
	for _, h := range v.Hops {
		order = append(order, h.Seq)
	}
	if got := strings.TrimSpace(fmtSeqs(order)); got != "5 10 11 12 13 14 15 16 17" {
		t.Errorf("hops in order %s, want by time", got)
	}
	if v.Hops[0].At != 0 || v.Hops[1].At != 50 || v.Hops[2].Latency != 5 || v.Hops[0].Latency != -1 {
		t.Errorf("offsets/latencies %+v %+v %+v", v.Hops[0], v.Hops[1], v.Hops[2])
	}
	var lanes []string
	for _, l := range v.Lanes {
		lanes = append(lanes, l.ID)
	}
	if got := strings.Join(lanes, ","); got != "kubelet,apiserver,raycluster,rayjob,dashboard,endpoints" {
		t.Errorf("lanes %s, want the known ones in order, then the others", got)
	}
	lt := v.Latency
	if lt == nil || lt.From != "head Pod Ready" || lt.To != "job submitted" {
		t.Fatalf("latency table %+v, want head Pod Ready → job submitted", lt)
	}
	var rows []string
	for _, r := range lt.Rows {
		rows = append(rows, r.Label)
	}
	// The map folds into the enqueue and the dequeue into the Reconcile; the call is sent, then answered.
	want := "PATCH Pod h status Ready=True|accepted patch status Pod h|watch update Pod h|enqueue RayCluster c (new)|" +
		"queue wait → Reconcile RayJob j|POST /api/jobs/ sent|POST answered (200)"
	if got := strings.Join(rows, "|"); got != want {
		t.Errorf("rows\n %s\nwant\n %s", got, want)
	}
	if lt.Total != 30 || lt.Rows[len(lt.Rows)-2].Total != 28 {
		t.Errorf("total %.1f (sent at %.1f), want 30 (28)", lt.Total, lt.Rows[len(lt.Rows)-2].Total)
	}
	if !v.Hops[1].OnPath || v.Hops[0].OnPath {
		t.Error("OnPath marks the wrong hops")
	}
}

func fmtSeqs(s []uint64) string {
	var b strings.Builder
	for _, n := range s {
		b.WriteString(" " + itoa(int(n)))
	}
	return b.String()
}

// TestViewFromAPIDrawsDeliveries: for an object only an operator outside rayctl acts on, the watch
// event that carried the kubelet's write to the operator goes from the API server to the operator's
// lane, and the operator's write after it from its lane, with what it did out of sight.
func TestViewFromAPIDrawsDeliveries(t *testing.T) {
	const op = "kuberay-operator"
	head := chain.Ref{Kind: "Pod", Namespace: "ns", Name: "c-head-x", ResourceVersion: "9"}
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	f := &chainFeed{changed: make(chan struct{})}
	f.events.Add(100,
		chain.Event{Seq: 1, Mono: ms(1), Component: "apiserver", Hop: chain.APIWrite, Object: head, Duration: time.Millisecond / 2,
			Call: &chain.Call{Verb: "patch", Subresource: "status", User: "system:node:vm", Code: 200}},
		chain.Event{Seq: 2, Mono: ms(2), Component: "apiserver", Hop: chain.WatchDelivery, Outcome: chain.Update, Object: head,
			Call: &chain.Call{Verb: "watch", User: op}},
		chain.Event{Seq: 3, Mono: ms(3), Component: "kubelet", Hop: chain.KubeletWrite, Object: head, Pod: &chain.PodStatus{Phase: "Running", Ready: "True"}},
		chain.Event{Seq: 4, Mono: ms(9), Component: "apiserver", Hop: chain.APIWrite, Outcome: "update status",
			Object: chain.Ref{Kind: "RayCluster", Namespace: "ns", Name: "c", ResourceVersion: "10"},
			Call:   &chain.Call{Verb: "update", Subresource: "status", User: op, Code: 200}, Status: []chain.Field{chain.F("state", "ready")}},
	)
	v := f.view("RayCluster", "ns", "c", true)
	if !v.FromAPI {
		t.Fatal("the view is not drawn from the API server's side")
	}
	var got []string
	for _, h := range v.Hops {
		got = append(got, h.Hop+" "+h.Lane+"→"+h.To)
	}
	want := "kubelet-write kubelet→apiserver|api-deliver apiserver→" + op + "|api-write " + op + "→apiserver"
	if strings.Join(got, "|") != want {
		t.Errorf("hops\n %s\nwant\n %s", strings.Join(got, "|"), want)
	}
	if last := v.Hops[len(v.Hops)-1]; !strings.Contains(last.Unseen, "its cache, queue and reconcile") {
		t.Errorf("the operator's write: unseen %q", last.Unseen)
	}
}
