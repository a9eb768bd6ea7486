package raysim

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/node"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// localTempDir is where local commands look for a head started on this machine.
func localTempDir() string {
	if d := os.Getenv("RAY_TMPDIR"); d != "" {
		return d
	}
	return node.DefaultTempDir
}

// resolveGCS finds the GCS address: the flag, else $RAY_ADDRESS (when it is
// not a URL), else the head started on this machine, else 127.0.0.1:6379.
func resolveGCS(flagAddr string) (string, error) {
	addr := flagAddr
	if addr == "" {
		if env := os.Getenv("RAY_ADDRESS"); env != "" && !strings.Contains(env, "://") {
			addr = env
		}
	}
	if addr == "" || addr == "auto" {
		if info, err := node.ReadHeadInfo(localTempDir()); err == nil {
			return info.GCSAddress, nil
		}
		if addr == "auto" {
			return "", fmt.Errorf("no head is running on this machine (no %s/raysim/head.json)", localTempDir())
		}
		return fmt.Sprintf("127.0.0.1:%d", defaultGCSPort), nil
	}
	if strings.Contains(addr, "://") {
		return "", fmt.Errorf("%q is a URL; this command needs the GCS address HOST:PORT", addr)
	}
	return withDefaultPort(addr, defaultGCSPort), nil
}

func cmdHealthCheck(args []string, stdout, stderr io.Writer) int {
	f := newFlagSet("health-check", stderr).value("address", "component").boolean("skip-version-check")
	if err := f.parse(args); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	if f.str("component") != "" {
		fmt.Fprintf(stderr, "raysim: warning: ray health-check: --component=%s is not checked separately; checking the GCS\n", f.str("component"))
	}
	addr, err := resolveGCS(f.str("address"))
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := gcs.NewClient(addr).Health(ctx); err != nil {
		fmt.Fprintf(stderr, "raysim: GCS at %s is not healthy: %v\n", addr, err)
		return 1
	}
	return 0
}

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	f := newFlagSet("status", stderr).value("address").boolean("verbose", "v")
	if err := f.parse(args); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	addr, err := resolveGCS(f.str("address"))
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := gcs.NewClient(addr).Nodes(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "raysim: cannot reach the GCS at %s: %v\n", addr, err)
		return 1
	}
	fmt.Fprint(stdout, FormatStatus(nodes, time.Now()))
	return 0
}

// FormatStatus renders nodes the way `ray status` lays out its report:
// active and dead nodes, then resource usage summed over the active nodes.
func FormatStatus(nodes []gcs.NodeInfo, now time.Time) string {
	var b strings.Builder
	line := strings.Repeat("-", 60)
	fmt.Fprintf(&b, "======== Cluster status (raysim): %s ========\n", now.Format("2006-01-02 15:04:05"))
	fmt.Fprintf(&b, "Node status\n%s\nActive:\n", line)
	total, avail := resource.Set{}, resource.Set{}
	active, dead := 0, 0
	for _, n := range nodes {
		if n.State != gcs.StateAlive {
			continue
		}
		active++
		role := "worker"
		if n.IsHead {
			role = "head"
		}
		fmt.Fprintf(&b, " 1 node_%s (%s, %s)\n", n.NodeID, role, n.NodeIP)
		total.Add(n.Total)
		avail.Add(n.Available)
	}
	if active == 0 {
		b.WriteString(" (no active nodes)\n")
	}
	b.WriteString("Pending:\n (no pending nodes)\nDead:\n")
	for _, n := range nodes {
		if n.State == gcs.StateAlive {
			continue
		}
		dead++
		fmt.Fprintf(&b, " 1 node_%s (%s): %s\n", n.NodeID, n.NodeIP, n.DeathReason)
	}
	if dead == 0 {
		b.WriteString(" (no dead nodes)\n")
	}
	fmt.Fprintf(&b, "\nResources\n%s\nUsage:\n", line)
	for _, k := range total.Names() {
		if strings.HasPrefix(k, "node:") {
			continue
		}
		used := total[k] - avail[k]
		if k == resource.Memory || strings.HasSuffix(k, "memory") {
			fmt.Fprintf(&b, " %s/%s %s\n", resource.FormatBytes(used), resource.FormatBytes(total[k]), k)
		} else {
			fmt.Fprintf(&b, " %.1f/%.1f %s\n", used, total[k], k)
		}
	}
	b.WriteString("\nDemands:\n (raysim does not schedule tasks or actors; job entrypoints waiting for resources stay PENDING)\n")
	return b.String()
}
