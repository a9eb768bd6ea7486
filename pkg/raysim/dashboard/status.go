package dashboard

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// FormatStatus renders the cluster the way Ray 2.60's `ray status` lays out its report: alive nodes
// counted by node type, as active (running a job) or idle; dead nodes as recent failures; the resources
// summed over the alive nodes; the resources pending jobs wait for as demands; the workers an autoscaler
// asked for that have not joined yet (launching, by node type) as pending. Nothing is ever requested
// through request_resources.
func FormatStatus(nodes []gcs.NodeInfo, demands []resource.Set, launching map[string]int, now time.Time) string {
	header := "======== Autoscaler status: " + now.Format("2006-01-02 15:04:05.000000") + " ========"
	sep := strings.Repeat("-", len(header))
	var active, idle, failures []gcs.NodeInfo
	total, avail := resource.Set{}, resource.Set{}
	for _, n := range nodes {
		switch {
		case n.State != gcs.StateAlive:
			failures = append(failures, n)
			continue
		case n.RunningJobs > 0:
			active = append(active, n)
		default:
			idle = append(idle, n)
		}
		total.Add(n.Total)
		avail.Add(n.Available)
	}
	lines := []string{header, "Node status", sep,
		"Active:", countByType(active, " (no active nodes)"),
		"Idle:", countByType(idle, " (no idle nodes)"),
		"Pending:"}
	lines = append(lines, pendingLines(launching)...)
	lines = append(lines, "Recent failures:")
	if len(failures) == 0 {
		lines = append(lines, " (no failures)")
	}
	for _, n := range failures {
		lines = append(lines, fmt.Sprintf(" %s: NodeTerminated (instance_id: %s)", nodeType(n), n.Hostname))
	}
	lines = append(lines, "", "Resources", sep, "Total Usage:")
	names := total.Names()
	sort.Strings(names)
	for _, k := range names {
		if strings.HasPrefix(k, "node:") {
			continue
		}
		used := total[k] - avail[k]
		if k == resource.Memory || k == resource.ObjectStoreMemory {
			lines = append(lines, fmt.Sprintf(" %s/%s %s", resource.FormatBytes(used), resource.FormatBytes(total[k]), k))
		} else {
			lines = append(lines, fmt.Sprintf(" %.1f/%.1f %s", used, total[k], k))
		}
	}
	lines = append(lines, "", "From request_resources:", " (none)", "Pending Demands:")
	lines = append(lines, demandLines(demands)...)
	return strings.Join(lines, "\n") + "\n"
}

// pendingLines are Ray's " <type>, <n> launching" lines, by node type.
func pendingLines(launching map[string]int) []string {
	var out []string
	types := make([]string, 0, len(launching))
	for t := range launching {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		if launching[t] > 0 {
			out = append(out, fmt.Sprintf(" %s, %d launching", t, launching[t]))
		}
	}
	if len(out) == 0 {
		return []string{" (no pending nodes)"}
	}
	return out
}

// nodeType is the name `ray status` counts a node under: its node type, else node_<id>.
func nodeType(n gcs.NodeInfo) string {
	if n.NodeTypeName != "" {
		return n.NodeTypeName
	}
	return "node_" + n.NodeID
}

// countByType is " <count> <type>" per node type in order of first appearance, or none when empty.
func countByType(nodes []gcs.NodeInfo, none string) string {
	if len(nodes) == 0 {
		return none
	}
	var order []string
	count := map[string]int{}
	for _, n := range nodes {
		t := nodeType(n)
		if count[t] == 0 {
			order = append(order, t)
		}
		count[t]++
	}
	out := make([]string, len(order))
	for i, t := range order {
		out[i] = fmt.Sprintf(" %d %s", count[t], t)
	}
	return strings.Join(out, "\n")
}

// demandLines are Ray's " {'CPU': 5.0}: 1+ pending tasks/actors" lines, one per distinct demand.
func demandLines(demands []resource.Set) []string {
	var order []string
	count := map[string]int{}
	for _, d := range demands {
		if d.IsZero() {
			continue
		}
		names := d.Names()
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("'%s': %s", k, pyFloat(d[k]))
		}
		key := "{" + strings.Join(parts, ", ") + "}"
		if count[key] == 0 {
			order = append(order, key)
		}
		count[key]++
	}
	if len(order) == 0 {
		return []string{" (no resource demands)"}
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = fmt.Sprintf(" %s: %d+ pending tasks/actors", k, count[k])
	}
	return out
}

// pyFloat prints v as Python prints a float (5.0, 0.5).
func pyFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}
