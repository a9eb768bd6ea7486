package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// TestFormatStatusLaysOutAsRay checks the report's shape against Ray 2.60's `ray status`: nodes counted
// by type as active (running a job) or idle, dead ones as failures, resources sorted by name without the
// node: ones, memory in bytes, and pending jobs' demands in Ray's wording.
func TestFormatStatusLaysOutAsRay(t *testing.T) {
	nodes := []gcs.NodeInfo{
		{NodeID: "h", State: gcs.StateAlive, NodeTypeName: "headgroup", RunningJobs: 1,
			Total: resource.Set{"CPU": 1, "memory": 1 << 30, "node:10.0.0.1": 1}, Available: resource.Set{"CPU": 0.5, "memory": 1 << 30, "node:10.0.0.1": 1}},
		{NodeID: "w1", State: gcs.StateAlive, NodeTypeName: "workers", Total: resource.Set{"CPU": 2}, Available: resource.Set{"CPU": 2}},
		{NodeID: "w2", State: gcs.StateAlive, NodeTypeName: "workers", Total: resource.Set{"CPU": 2}, Available: resource.Set{"CPU": 2}},
		{NodeID: "w0", State: gcs.StateDead, NodeTypeName: "workers", Hostname: "worker-0"},
	}
	got := FormatStatus(nodes, []resource.Set{{"CPU": 5}, {"CPU": 5}}, nil, time.Date(2026, 12, 1, 23, 43, 34, 992838000, time.UTC))
	want := `======== Autoscaler status: 2026-12-01 23:43:34.992838 ========
Node status
---------------------------------------------------------------
Active:
 1 headgroup
Idle:
 2 workers
Pending:
 (no pending nodes)
Recent failures:
 workers: NodeTerminated (instance_id: worker-0)

Resources
---------------------------------------------------------------
Total Usage:
 0.5/5.0 CPU
 0B/1.00GiB memory

From request_resources:
 (none)
Pending Demands:
 {'CPU': 5.0}: 2+ pending tasks/actors
`
	if got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
	if empty := FormatStatus(nil, nil, nil, time.Now()); !strings.Contains(empty, "Active:\n (no active nodes)\nIdle:\n (no idle nodes)\n") || !strings.HasSuffix(empty, "Pending Demands:\n (no resource demands)\n") {
		t.Errorf("empty report:\n%s", empty)
	}
}
