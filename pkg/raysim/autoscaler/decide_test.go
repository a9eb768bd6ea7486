package autoscaler

import (
	"reflect"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

func cpu(n float64) resource.Set { return resource.Set{resource.CPU: n} }

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	head := Node{Pod: "c-head-x", Available: cpu(1), Idle: true}
	small := Group{Name: "small", Min: 0, Max: 3, Shape: cpu(2)}
	withReplicas := func(g Group, n int32, pods ...string) Group { g.Replicas = n; g.Pods = pods; return g }
	cases := []struct {
		name       string
		s          State
		want       []Change
		waiting    []string
		infeasible int
	}{
		{
			name: "demand the head holds: nothing to do",
			s:    State{Groups: []Group{small}, Nodes: []Node{head}, Demands: []resource.Set{cpu(1)}},
		},
		{
			name: "demand beyond the head: one worker",
			s:    State{Groups: []Group{small}, Nodes: []Node{head}, Demands: []resource.Set{cpu(2)}},
			want: []Change{{Index: 0, Group: "small", Replicas: 1}},
		},
		{
			name: "two demands share one new worker",
			s:    State{Groups: []Group{small}, Nodes: []Node{head}, Demands: []resource.Set{cpu(1.5), cpu(0.5), cpu(1.5)}},
			// 1.5 on the head? no (1 free); 1.5 → new worker (0.5 left); 0.5 → head; 1.5 → second worker
			want: []Change{{Index: 0, Group: "small", Replicas: 2}},
		},
		{
			name: "bounded by maxReplicas",
			s:    State{Groups: []Group{small}, Nodes: []Node{head}, Demands: []resource.Set{cpu(2), cpu(2), cpu(2), cpu(2), cpu(2)}},
			want: []Change{{Index: 0, Group: "small", Replicas: 3}},
		},
		{
			name: "a worker asked for but not joined holds the demand",
			s:    State{Groups: []Group{withReplicas(small, 1, "w1")}, Nodes: []Node{head}, Demands: []resource.Set{cpu(2)}},
		},
		{
			name:       "too big for any group: infeasible",
			s:          State{Groups: []Group{small}, Nodes: []Node{head}, Demands: []resource.Set{cpu(8)}},
			infeasible: 1,
		},
		{
			name: "the group that fits; a new worker's leftover holds later demands",
			s: State{Groups: []Group{small, {Name: "gpu", Max: 2, Shape: resource.Set{resource.CPU: 4, resource.GPU: 1}}},
				Nodes: []Node{head}, Demands: []resource.Set{{resource.GPU: 1}, cpu(2)}},
			want: []Change{{Index: 1, Group: "gpu", Replicas: 1}},
		},
		{
			name: "conservative: at most 5 launching with none running",
			s: State{Groups: []Group{{Name: "g", Max: 10, Shape: cpu(1)}}, Nodes: []Node{head}, Mode: ModeConservative,
				Demands: []resource.Set{cpu(1), cpu(1), cpu(1), cpu(1), cpu(1), cpu(1), cpu(1), cpu(1)}},
			want: []Change{{Index: 0, Group: "g", Replicas: 5}},
		},
		{
			name: "default: unbounded but maxReplicas",
			s: State{Groups: []Group{{Name: "g", Max: 10, Shape: cpu(1)}}, Nodes: []Node{head}, Mode: ModeDefault,
				Demands: []resource.Set{cpu(1), cpu(1), cpu(1), cpu(1), cpu(1), cpu(1), cpu(1), cpu(1)}},
			want: []Change{{Index: 0, Group: "g", Replicas: 7}}, // the head holds one
		},
		{
			name: "idle past the timeout: goes, listed in workersToDelete",
			s: State{Groups: []Group{withReplicas(small, 2, "w1", "w2")}, Nodes: []Node{head,
				{Pod: "w1", Group: "small", Available: cpu(2), Idle: true}, {Pod: "w2", Group: "small", Available: cpu(2), Idle: true}},
				IdleSince: map[string]time.Time{"w1": now.Add(-time.Minute), "w2": now.Add(-time.Second)}, Now: now, IdleTimeout: 10 * time.Second},
			want: []Change{{Index: 0, Group: "small", Replicas: 1, WorkersToDelete: []string{"w1"}}},
		},
		{
			name: "idle but minReplicas holds it",
			s: State{Groups: []Group{withReplicas(Group{Name: "g", Min: 1, Max: 3, Shape: cpu(2)}, 1, "w1")}, Nodes: []Node{head,
				{Pod: "w1", Group: "g", Available: cpu(2), Idle: true}},
				IdleSince: map[string]time.Time{"w1": now.Add(-time.Hour)}, Now: now, IdleTimeout: 10 * time.Second},
		},
		{
			name: "a busy worker stays",
			s: State{Groups: []Group{withReplicas(small, 1, "w1")}, Nodes: []Node{head, {Pod: "w1", Group: "small", Available: cpu(0)}},
				IdleSince: map[string]time.Time{}, Now: now, IdleTimeout: time.Second},
		},
		{
			name: "an idle worker a pending demand lands on stays",
			s: State{Groups: []Group{withReplicas(small, 1, "w1")}, Nodes: []Node{head, {Pod: "w1", Group: "small", Available: cpu(2), Idle: true}},
				Demands:   []resource.Set{cpu(2)},
				IdleSince: map[string]time.Time{"w1": now.Add(-time.Hour)}, Now: now, IdleTimeout: time.Second},
		},
		{
			name: "workersToDelete still there: wait",
			s: State{Groups: []Group{{Name: "small", Max: 3, Replicas: 0, Shape: cpu(2), Pods: []string{"w1"}, WorkersToDelete: []string{"w1"}}},
				Nodes: []Node{head}, Demands: []resource.Set{cpu(2)}},
			waiting: []string{"small"},
		},
		{
			name: "workersToDelete gone: cleared",
			s: State{Groups: []Group{{Name: "small", Max: 3, Replicas: 0, Shape: cpu(2), WorkersToDelete: []string{"w1"}}},
				Nodes: []Node{head}},
			want: []Change{{Index: 0, Group: "small", Replicas: 0}},
		},
		{
			name: "workersToDelete gone and demand: cleared and scaled up",
			s: State{Groups: []Group{{Name: "small", Max: 3, Replicas: 0, Shape: cpu(2), WorkersToDelete: []string{"w1"}}},
				Nodes: []Node{head}, Demands: []resource.Set{cpu(2)}},
			want: []Change{{Index: 0, Group: "small", Replicas: 1}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.s)
			got := make([]Change, len(d.Changes))
			for i, c := range d.Changes {
				c.Reason = ""
				got[i] = c
			}
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("changes = %+v, want %+v", got, tc.want)
			}
			if !reflect.DeepEqual(d.Waiting, tc.waiting) {
				t.Errorf("waiting = %v, want %v", d.Waiting, tc.waiting)
			}
			if len(d.Infeasible) != tc.infeasible {
				t.Errorf("infeasible = %v, want %d", d.Infeasible, tc.infeasible)
			}
		})
	}
}
