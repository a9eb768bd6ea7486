// Package gcs is raysim's stand-in for Ray's Global Control Store: a table of
// the cluster's nodes (the head and the workers that registered), their
// resources and what running jobs hold of them, kept alive by heartbeats.
//
// Its wire protocol (see Handler and Client) is raysim's own small HTTP/JSON
// protocol, not Ray's gRPC; only raysim processes speak it.
package gcs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// Node states, as Ray names them.
const (
	StateAlive = "ALIVE"
	StateDead  = "DEAD"
)

// ErrUnknownNode is returned for a heartbeat or leave from a node the table
// does not know or has already declared dead.
var ErrUnknownNode = errors.New("node is not registered with this GCS")

// NodeInfo describes one node of the cluster.
type NodeInfo struct {
	NodeID      string       `json:"node_id"`
	NodeIP      string       `json:"node_ip_address"`
	IsHead      bool         `json:"is_head_node"`
	State       string       `json:"state"`
	Total       resource.Set `json:"resources_total"`
	Available   resource.Set `json:"resources_available,omitempty"`
	AgentPort   int          `json:"agent_port,omitempty"`
	MetricsPort int          `json:"metrics_export_port,omitempty"`
	StartTimeMs int64        `json:"start_time_ms"`
	EndTimeMs   int64        `json:"end_time_ms,omitempty"`
	DeathReason string       `json:"death_reason,omitempty"`
	Hostname    string       `json:"node_name,omitempty"`
	// InstanceID is the node's cloud instance ($RAY_CLOUD_INSTANCE_ID: the Pod's name under KubeRay).
	InstanceID    string `json:"instance_id,omitempty"`
	RaysimVersion string `json:"raysim_version,omitempty"`
	// NodeTypeName is the node's type ($RAY_NODE_TYPE_NAME; KubeRay sets the group's name), as `ray
	// status` counts nodes.
	NodeTypeName string `json:"node_type_name,omitempty"`
	// RunningJobs counts the job entrypoints holding a reservation on the node; a node with none is idle.
	RunningJobs int `json:"running_jobs,omitempty"`
}

type nodeEntry struct {
	info     NodeInfo
	reserved resource.Set
	jobs     int
	lastBeat time.Time
	order    int
}

// Table is the node table. Its zero value is not usable; call NewTable.
type Table struct {
	deadAfter time.Duration
	onChange  func()
	now       func() time.Time

	mu         sync.Mutex
	nodes      map[string]*nodeEntry
	seq        int
	autoscaler *AutoscalerStatus
}

// AutoscalerStatus is what an autoscaler last reported to the GCS (Ray's autoscaler writes its state
// to the GCS, where the dashboard and `ray status` read it).
type AutoscalerStatus struct {
	// Time is when it was reported.
	Time time.Time `json:"time"`
	// Launching counts, per node type, workers asked for that have not joined yet.
	Launching map[string]int `json:"launching,omitempty"`
	// Infeasible are demands no node type can hold.
	Infeasible []resource.Set `json:"infeasible,omitempty"`
}

// SetAutoscalerStatus records an autoscaler's report.
func (t *Table) SetAutoscalerStatus(s AutoscalerStatus) {
	t.mu.Lock()
	t.autoscaler = &s
	t.mu.Unlock()
}

// Autoscaler returns the autoscaler's last report, or nil if none came within maxAge.
func (t *Table) Autoscaler(maxAge time.Duration) *AutoscalerStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.autoscaler == nil || t.now().Sub(t.autoscaler.Time) > maxAge {
		return nil
	}
	s := *t.autoscaler
	return &s
}

// NewTable returns a table that declares a worker dead when no heartbeat came
// for deadAfter. onChange, if not nil, is called (without locks held) whenever
// capacity may have changed: a node joined or left, or a reservation was released.
func NewTable(deadAfter time.Duration, onChange func()) *Table {
	return &Table{deadAfter: deadAfter, onChange: onChange, now: time.Now, nodes: map[string]*nodeEntry{}}
}

// SetOnChange replaces the change callback.
func (t *Table) SetOnChange(f func()) {
	t.mu.Lock()
	t.onChange = f
	t.mu.Unlock()
}

func (t *Table) changed() {
	t.mu.Lock()
	f := t.onChange
	t.mu.Unlock()
	if f != nil {
		f()
	}
}

// NewNodeID returns a random node id shaped like Ray's (28 bytes, hex).
func NewNodeID() string {
	b := make([]byte, 28)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Register adds (or revives) a node as ALIVE. An empty NodeID gets a fresh one.
// It returns the stored info.
func (t *Table) Register(info NodeInfo) NodeInfo {
	if info.NodeID == "" {
		info.NodeID = NewNodeID()
	}
	now := t.now()
	info.State = StateAlive
	info.EndTimeMs = 0
	info.DeathReason = ""
	if info.StartTimeMs == 0 {
		info.StartTimeMs = now.UnixMilli()
	}
	info.Total = info.Total.Clone()
	t.mu.Lock()
	t.seq++
	t.nodes[info.NodeID] = &nodeEntry{info: info, reserved: resource.Set{}, lastBeat: now, order: t.seq}
	t.mu.Unlock()
	t.changed()
	return info
}

// Heartbeat records that a node is alive.
func (t *Table) Heartbeat(nodeID string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.nodes[nodeID]
	if !ok || e.info.State != StateAlive {
		return ErrUnknownNode
	}
	e.lastBeat = t.now()
	return nil
}

// Leave marks a node DEAD with the given reason.
func (t *Table) Leave(nodeID, reason string) error {
	t.mu.Lock()
	e, ok := t.nodes[nodeID]
	if !ok || e.info.State != StateAlive {
		t.mu.Unlock()
		return ErrUnknownNode
	}
	t.markDead(e, reason)
	t.mu.Unlock()
	t.changed()
	return nil
}

func (t *Table) markDead(e *nodeEntry, reason string) {
	e.info.State = StateDead
	e.info.EndTimeMs = t.now().UnixMilli()
	e.info.DeathReason = reason
	e.reserved = resource.Set{}
}

// Reap declares dead every worker whose last heartbeat is older than the
// table's timeout. The head node is never reaped. It returns how many died.
func (t *Table) Reap() int {
	now := t.now()
	n := 0
	t.mu.Lock()
	for _, e := range t.nodes {
		if e.info.IsHead || e.info.State != StateAlive {
			continue
		}
		if now.Sub(e.lastBeat) > t.deadAfter {
			t.markDead(e, "no heartbeat from the node within the health-check timeout")
			n++
		}
	}
	t.mu.Unlock()
	if n > 0 {
		t.changed()
	}
	return n
}

// RunReaper calls Reap periodically until stop is closed.
func (t *Table) RunReaper(stop <-chan struct{}) {
	period := t.deadAfter / 4
	if period < 50*time.Millisecond {
		period = 50 * time.Millisecond
	}
	tk := time.NewTicker(period)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			t.Reap()
		}
	}
}

// Nodes returns every node, alive first then dead, each in registration
// order, with Available filled in for alive nodes.
func (t *Table) Nodes() []NodeInfo {
	t.mu.Lock()
	entries := make([]*nodeEntry, 0, len(t.nodes))
	for _, e := range t.nodes {
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool {
		ai, aj := entries[i].info.State == StateAlive, entries[j].info.State == StateAlive
		if ai != aj {
			return ai
		}
		return entries[i].order < entries[j].order
	})
	out := make([]NodeInfo, 0, len(entries))
	for _, e := range entries {
		info := e.info
		info.Total = e.info.Total.Clone()
		info.RunningJobs = e.jobs
		if info.State == StateAlive {
			info.Available = e.info.Total.Clone().Sub(e.reserved)
		} else {
			info.Available = nil
		}
		out = append(out, info)
	}
	t.mu.Unlock()
	return out
}

// Totals returns the summed total and available resources of the alive nodes.
func (t *Table) Totals() (total, available resource.Set) {
	total, available = resource.Set{}, resource.Set{}
	for _, n := range t.Nodes() {
		if n.State != StateAlive {
			continue
		}
		total.Add(n.Total)
		available.Add(n.Available)
	}
	return total, available
}

// Reserve finds the first alive node (head first) with req free, reserves it
// there for one job and returns the node's id. ok is false when no node has
// room now. An empty req reserves nothing but still counts the job on the node.
func (t *Table) Reserve(req resource.Set) (nodeID string, ok bool) {
	for _, n := range t.Nodes() {
		if n.State != StateAlive || !n.Available.Fits(req) {
			continue
		}
		t.mu.Lock()
		e, found := t.nodes[n.NodeID]
		if found && e.info.State == StateAlive && e.info.Total.Clone().Sub(e.reserved).Fits(req) {
			e.reserved.Add(req)
			e.jobs++
			t.mu.Unlock()
			return n.NodeID, true
		}
		t.mu.Unlock()
	}
	return "", false
}

// Release gives back a reservation made by Reserve. Releasing on a dead or
// unknown node is a no-op.
func (t *Table) Release(nodeID string, req resource.Set) {
	t.mu.Lock()
	if e, ok := t.nodes[nodeID]; ok && e.info.State == StateAlive {
		e.reserved.Sub(req)
		if e.jobs > 0 {
			e.jobs--
		}
	}
	t.mu.Unlock()
	t.changed()
}
