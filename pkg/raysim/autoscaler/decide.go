// Package autoscaler is raysim's `ray kuberay-autoscaler`: the sidecar KubeRay runs in an autoscaling
// head Pod. Each pass it reads the RayCluster and its Pods from the API server (in-cluster
// credentials), the nodes and the pending demands from its head's GCS, decides (Decide, a pure
// function), and patches the RayCluster's worker groups: replicas up for demand nothing can hold,
// replicas down with the idle workers' Pod names in scaleStrategy.workersToDelete.
//
// What it models of Ray's autoscaler (v1, the monitor KubeRay's sidecar runs): demands are the
// resources of jobs waiting to start (raysim has no tasks or actors); they are packed first-fit onto
// what alive nodes have free and onto workers already asked for but not yet joined, then onto new
// workers, choosing for each demand the first group (in spec order) whose one worker can hold it and
// that is below maxReplicas; a demand no group can hold is reported infeasible. A worker's shape is its
// group's `ray start` resources (rayStartParams num-cpus/num-gpus/memory/resources, else the Ray
// container's CPU/GPU/memory limits, else requests). upscalingMode is Ray's upscaling speed:
// Conservative allows as many workers launching per group as are running (at least 5, Ray's initial
// batch), Default and Aggressive do not limit. A worker idle (no job holds any of its resources) for
// idleTimeoutSeconds goes, the group staying at or above minReplicas. While a group's
// workersToDelete names Pods that still exist the pass changes nothing; once they are gone the list is
// cleared, as Ray's KubeRay node provider does. Multi-host groups (numOfHosts > 1) count one Ray node
// per Pod and scale by replicas.
package autoscaler

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// Upscaling modes (autoscalerOptions.upscalingMode).
const (
	ModeConservative = "Conservative"
	ModeDefault      = "Default"
	ModeAggressive   = "Aggressive"
)

// initialLaunchBatch is the floor of Ray's upscaling-speed bound: this many workers of a group may
// always be launching.
const initialLaunchBatch = 5

// Group is one worker group as the autoscaler sees it.
type Group struct {
	// Name is the group's name (its Ray node type).
	Name string
	// Min, Max and Replicas are the group's minReplicas, maxReplicas and replicas.
	Min, Max, Replicas int32
	// Shape is one worker's resources.
	Shape resource.Set
	// Pods are the names of the group's worker Pods that exist and are not being deleted.
	Pods []string
	// WorkersToDelete is the group's scaleStrategy.workersToDelete.
	WorkersToDelete []string
}

// Node is one alive Ray node.
type Node struct {
	// Pod is the node's Pod name (its instance id), Group its node type ("" for the head).
	Pod, Group string
	// Available is what is free on the node; Idle means no job holds any of it.
	Available resource.Set
	Idle      bool
}

// State is everything a decision depends on.
type State struct {
	Groups  []Group
	Nodes   []Node
	Demands []resource.Set
	// IdleSince maps a worker Pod to when it was first seen idle (kept by the caller across passes).
	IdleSince   map[string]time.Time
	Now         time.Time
	IdleTimeout time.Duration
	Mode        string
}

// Change is what to write to one group.
type Change struct {
	// Index is the group's index in spec.workerGroupSpecs.
	Index int
	// Group is its name.
	Group string
	// Replicas is the new replicas.
	Replicas int32
	// WorkersToDelete is the new scaleStrategy.workersToDelete.
	WorkersToDelete []string
	// Reason says why, for the log.
	Reason string
}

// Decision is the result of one pass.
type Decision struct {
	// Changes are the groups to patch, in spec order.
	Changes []Change
	// Waiting names groups left alone because Pods they asked to delete still exist.
	Waiting []string
	// Infeasible are demands no group's worker could ever hold (a demand that waits for a group below
	// maxReplicas, or for launching workers, is not listed).
	Infeasible []resource.Set
	// Launching counts, per group, workers asked for that have not joined the cluster.
	Launching map[string]int
}

// Decide computes one pass of the autoscaler. It does not modify s.
func Decide(s State) Decision {
	d := Decision{Launching: map[string]int{}}
	byGroup := map[string]int{}
	for i, g := range s.Groups {
		byGroup[g.Name] = i
	}
	// Free capacity: alive nodes, then workers asked for (replicas) that have not joined.
	var bins []resource.Set
	joined := map[string]int{}
	usedPod := map[string]bool{}
	for _, n := range s.Nodes {
		bins = append(bins, n.Available.Clone())
		if _, ok := byGroup[n.Group]; ok && n.Group != "" {
			joined[n.Group]++
		}
	}
	for _, g := range s.Groups {
		if n := int(g.Replicas) - joined[g.Name]; n > 0 {
			d.Launching[g.Name] = n
			for range n {
				bins = append(bins, g.Shape.Clone())
			}
		}
	}
	var unmet []resource.Set
	for _, dem := range s.Demands {
		if i := firstFit(bins, dem); i >= 0 {
			bins[i].Sub(dem)
			if i < len(s.Nodes) {
				usedPod[s.Nodes[i].Pod] = true
			}
			continue
		}
		unmet = append(unmet, dem)
	}

	// Upscale: new workers for what nothing holds.
	add := make([]int32, len(s.Groups))
	var fresh []resource.Set
	for _, dem := range unmet {
		if i := firstFit(fresh, dem); i >= 0 {
			fresh[i].Sub(dem)
			continue
		}
		gi := -1
		for i, g := range s.Groups {
			if len(g.WorkersToDelete) > 0 && pending(g) {
				continue
			}
			if g.Shape.Fits(dem) && g.Replicas+add[i] < g.Max && add[i] < launchBound(s.Mode, g, joined[g.Name], d.Launching[g.Name]) {
				gi = i
				break
			}
		}
		if gi < 0 {
			if !slices.ContainsFunc(s.Groups, func(g Group) bool { return g.Shape.Fits(dem) }) {
				d.Infeasible = append(d.Infeasible, dem)
			}
			continue
		}
		add[gi]++
		fresh = append(fresh, s.Groups[gi].Shape.Clone().Sub(dem))
	}

	for i, g := range s.Groups {
		if len(g.WorkersToDelete) > 0 {
			if pending(g) {
				d.Waiting = append(d.Waiting, g.Name)
				continue
			}
			// Everything asked for is gone: clear the list (and scale up alongside if needed).
			d.Changes = append(d.Changes, Change{Index: i, Group: g.Name, Replicas: clamp(g.Replicas+add[i], g),
				Reason: fmt.Sprintf("workers %v are gone; clearing workersToDelete", g.WorkersToDelete)})
			continue
		}
		if add[i] > 0 {
			d.Changes = append(d.Changes, Change{Index: i, Group: g.Name, Replicas: clamp(g.Replicas+add[i], g),
				Reason: fmt.Sprintf("adding %d worker(s) of %s for pending demands", add[i], g.Name)})
			continue
		}
		// Downscale: idle workers past the timeout, never below minReplicas, none holding a demand.
		var idle []string
		for _, n := range s.Nodes {
			if n.Group != g.Name || !n.Idle || usedPod[n.Pod] {
				continue
			}
			since, ok := s.IdleSince[n.Pod]
			if ok && s.Now.Sub(since) >= s.IdleTimeout {
				idle = append(idle, n.Pod)
			}
		}
		sort.Strings(idle)
		room := int(g.Replicas - g.Min)
		if room <= 0 || len(idle) == 0 {
			continue
		}
		idle = idle[:min(room, len(idle))]
		d.Changes = append(d.Changes, Change{Index: i, Group: g.Name, Replicas: g.Replicas - int32(len(idle)), WorkersToDelete: idle,
			Reason: fmt.Sprintf("removing %d idle worker(s) of %s: %v (idle for %s or more)", len(idle), g.Name, idle, s.IdleTimeout)})
	}
	return d
}

// pending reports whether a Pod g asked to delete still exists.
func pending(g Group) bool {
	for _, w := range g.WorkersToDelete {
		for _, p := range g.Pods {
			if p == w {
				return true
			}
		}
	}
	return false
}

// launchBound is how many more workers of g may be launching: Ray's upscaling speed (1 for
// Conservative, unbounded otherwise) times the workers running, at least initialLaunchBatch, less
// those already launching.
func launchBound(mode string, g Group, running, launching int) int32 {
	if mode != ModeConservative {
		return math.MaxInt32
	}
	return int32(max(running, initialLaunchBatch) - launching)
}

func clamp(n int32, g Group) int32 {
	return max(min(n, g.Max), g.Min)
}

// firstFit returns the index of the first bin that holds dem, or -1.
func firstFit(bins []resource.Set, dem resource.Set) int {
	for i, b := range bins {
		if b.Fits(dem) {
			return i
		}
	}
	return -1
}
