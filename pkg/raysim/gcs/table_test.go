package gcs

import (
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

func TestReserveReleaseAcrossNodes(t *testing.T) {
	changes := 0
	tb := NewTable(time.Minute, func() { changes++ })
	head := tb.Register(NodeInfo{IsHead: true, Total: resource.Set{"CPU": 1}})
	w := tb.Register(NodeInfo{Total: resource.Set{"CPU": 2, "GPU": 1}})

	if id, ok := tb.Reserve(resource.Set{"CPU": 1}); !ok || id != head.NodeID {
		t.Fatalf("first CPU should come from the head: %s %v", id, ok)
	}
	if id, ok := tb.Reserve(resource.Set{"CPU": 2}); !ok || id != w.NodeID {
		t.Fatalf("two CPUs should come from the worker: %s %v", id, ok)
	}
	if _, ok := tb.Reserve(resource.Set{"CPU": 0.5}); ok {
		t.Fatal("reserved a CPU that is not free")
	}
	if _, ok := tb.Reserve(resource.Set{"CPU": 1, "GPU": 1}); ok {
		t.Fatal("no single node has a free CPU and GPU")
	}
	total, avail := tb.Totals()
	if total["CPU"] != 3 || avail["CPU"] != 0 || avail["GPU"] != 1 {
		t.Fatalf("totals %v available %v", total, avail)
	}
	tb.Release(w.NodeID, resource.Set{"CPU": 2})
	if id, ok := tb.Reserve(resource.Set{"CPU": 1, "GPU": 1}); !ok || id != w.NodeID {
		t.Fatalf("after release: %s %v", id, ok)
	}
	if err := tb.Leave(w.NodeID, "bye"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Heartbeat(w.NodeID); err != ErrUnknownNode {
		t.Fatalf("heartbeat of a dead node: %v", err)
	}
	_, avail = tb.Totals()
	if avail["GPU"] != 0 || changes == 0 {
		t.Fatalf("dead node still counted: %v (changes %d)", avail, changes)
	}
}

func TestReapSparesTheHead(t *testing.T) {
	now := time.Unix(1000, 0)
	tb := NewTable(time.Second, nil)
	tb.now = func() time.Time { return now }
	head := tb.Register(NodeInfo{IsHead: true})
	w := tb.Register(NodeInfo{})
	now = now.Add(500 * time.Millisecond)
	if err := tb.Heartbeat(w.NodeID); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if n := tb.Reap(); n != 0 {
		t.Fatalf("reaped %d nodes within the timeout", n)
	}
	now = now.Add(time.Second)
	if n := tb.Reap(); n != 1 {
		t.Fatalf("reaped %d nodes, want the silent worker", n)
	}
	for _, n := range tb.Nodes() {
		if (n.NodeID == head.NodeID) != (n.State == StateAlive) {
			t.Fatalf("node %s is %s", n.NodeID, n.State)
		}
	}
}
