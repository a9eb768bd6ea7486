package main

// Suite egress: what pods' way out of the node costs (package egress: slirp4netns in the node
// namespace). A "world" beyond the host — a network namespace of the bench's own behind a veth, which
// the host routes to as to a LAN — answers a one-byte exchange per connection and streams 256 MiB on
// another port. The same Python client (netclient.go) measures it from the host and from pods of two
// `rayctl up` side by side, one as root and one as the laptop user (rootless), both on the process
// runtime (a network namespace per pod), whose connections go through the node namespace's NAT and
// slirp4netns; in rounds, each place in turn within a round. For each,
// it records which process holds the host's end of the bulk connection (`ss -p`) and the CPU time
// slirp4netns spent on the run: the path the packets took. Needs root.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

const (
	egressConns    = 1000 // per place, in egressRounds rounds
	egressRounds   = 4
	egressBulk     = 256 << 20 // per round
	egressNS       = "egress-bench"
	egressWorldNS  = "rayctl-bench-world"
	egressWorldDev = "rbworld0"
	egressHostIP   = "198.19.77.1"
	egressWorldIP  = "198.19.77.2"
)

// egressRow is what was measured from one place.
type egressRow struct {
	from     string
	run      connRun
	owner    string  // which process held the host's end of the bulk connection
	line     string  // the instance's egress line (pods only)
	slirpCPU float64 // CPU seconds slirp4netns spent while the client ran (pods only)
}

func runEgress(rayctl, out string) error {
	if os.Geteuid() != 0 {
		return errors.New("egress: the world namespace and the pod network need root")
	}
	load := loadAverage()
	// Who holds the host's end of each download, as the world accepts it (one per run, read after it).
	owners := make(chan string, 1)
	stopWorld, err := startWorld(func(peer string) { owners <- socketOwner(peer) })
	defer stopWorld()
	if err != nil {
		return fmt.Errorf("egress: the world namespace: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	insts, stopAll, err := startModes(ctx, rayctl, "egress", egressNS, []upMode{processRoot, processRootless})
	defer stopAll()
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	rows := []*egressRow{{from: "the host"}}
	slirp := []int{0}
	for _, in := range insts {
		rows = append(rows, &egressRow{from: "a pod, " + in.mode.who(), line: in.line("egress")})
		slirp = append(slirp, childNamed(in.up.Pid(), "slirp4netns"))
	}
	// In rounds, each place in turn within a round, so that the machine's other load falls on all alike.
	target := egressWorldIP + ":8080:8081"
	for round := range egressRounds {
		for i, r := range rows {
			cpu0 := procCPUSeconds(slirp[i])
			var runs []connRun
			if i == 0 {
				runs, err = hostClient(egressConns/egressRounds, target)
			} else {
				runs, err = podClient(ctx, insts[i-1].kube, egressNS, fmt.Sprintf("client-%d", round), egressConns/egressRounds, target)
			}
			if err != nil {
				return fmt.Errorf("egress from %s: %w (%s)", r.from, err, r.line)
			}
			r.run.add(runs[0])
			if slirp[i] > 0 {
				r.slirpCPU += procCPUSeconds(slirp[i]) - cpu0
			}
			r.owner = <-owners
		}
	}
	return writeEgress(out, rows, load)
}

// startWorld makes the world namespace, its veth and its two servers; onBulk is called with the peer's
// address of each bulk connection as it is accepted. The function returned removes them.
func startWorld(onBulk func(peer string)) (func(), error) {
	var lns []net.Listener
	stop := func() {
		for _, ln := range lns {
			ln.Close()
		}
		_ = exec.Command("ip", "link", "del", egressWorldDev).Run()
		_ = exec.Command("ip", "netns", "del", egressWorldNS).Run()
	}
	stop() // what an interrupted run left
	for _, argv := range [][]string{
		{"netns", "add", egressWorldNS},
		{"link", "add", egressWorldDev, "type", "veth", "peer", "name", "eth0", "netns", egressWorldNS},
		{"addr", "add", egressHostIP + "/30", "dev", egressWorldDev},
		{"link", "set", egressWorldDev, "up"},
		{"-n", egressWorldNS, "addr", "add", egressWorldIP + "/30", "dev", "eth0"},
		{"-n", egressWorldNS, "link", "set", "eth0", "up"},
		{"-n", egressWorldNS, "link", "set", "lo", "up"},
	} {
		if b, err := exec.Command("ip", argv...).CombinedOutput(); err != nil {
			return stop, fmt.Errorf("ip %s: %v: %s", strings.Join(argv, " "), err, b)
		}
	}
	serve := func(port string, handle func(net.Conn)) error {
		var ln net.Listener
		err := network.Do("/run/netns/"+egressWorldNS, func() error {
			var err error
			ln, err = net.Listen("tcp4", net.JoinHostPort(egressWorldIP, port))
			return err
		})
		if err != nil {
			return err
		}
		lns = append(lns, ln)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); handle(c) }()
			}
		}()
		return nil
	}
	chunk := make([]byte, 1<<20)
	err := errors.Join(
		serve("8080", func(c net.Conn) {
			b := make([]byte, 1)
			if _, err := c.Read(b); err == nil {
				_, _ = c.Write(b)
			}
		}),
		serve("8081", func(c net.Conn) {
			onBulk(c.RemoteAddr().String())
			for sent := 0; sent < egressBulk; sent += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}))
	return stop, err
}

// childNamed is the pid of the first process below pid whose name is comm (0: none).
func childNamed(pid int, comm string) int {
	for _, p := range descendants(pid) {
		if b, err := os.ReadFile("/proc/" + p + "/comm"); err == nil && strings.TrimSpace(string(b)) == comm {
			n, _ := strconv.Atoi(p)
			return n
		}
	}
	return 0
}

// ssUsers is the process ss -p names for a socket.
var ssUsers = regexp.MustCompile(`users:\(\("([^"]+)",pid=(\d+)`)

// socketOwner says which process, and as which uid, holds the socket of this (the host's) network
// namespace whose local address is addr, as `ss -tnp` sees it.
func socketOwner(addr string) string {
	b, err := exec.Command("ss", "-Htnp", "state", "established", "src", addr).Output()
	if err != nil {
		return "unknown (ss: " + err.Error() + ")"
	}
	m := ssUsers.FindStringSubmatch(string(b))
	if m == nil {
		return "no process of this namespace (" + strings.TrimSpace(string(b)) + ")"
	}
	uid := "?"
	if st, err := os.ReadFile("/proc/" + m[2] + "/status"); err == nil {
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
				uid = f[1]
			}
		}
	}
	return fmt.Sprintf("%s (uid %s)", m[1], uid)
}

func writeEgress(out string, rows []*egressRow, load string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Pods' way out (egress)\n\nMeasured %s. Machine: %s; load average %s when the suite started, %s when it ended.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), machine(), load, loadAverage())
	fmt.Fprintf(&b, "A server beyond the host (a network namespace behind a veth, routed like a LAN) answers a one-byte exchange "+
		"per TCP connection and streams %d MiB on another. The same Python client (bench/netclient.go, the system's python3) runs on "+
		"the host and in pods of two `rayctl up` running side by side, both on the process runtime (`%s`): one as root, one run by the "+
		"ordinary user rayctl-laptop (rootless: rayctl's node namespace inside a user namespace of its own). %d rounds, each place in turn "+
		"within a round (so that the machine's other load falls on all alike), each run %d connections one after another after %d to warm "+
		"up, then one download: %d connections and %d MiB per place in all.\n\n",
		egressBulk>>20, strings.Join(processRoot.args, " "), egressRounds, egressConns/egressRounds, netConnWarmup, egressConns, egressRounds*egressBulk>>20)
	b.WriteString("| from | connect + 1-byte exchange p50 | p90 | p99 | bulk download | host's end of the bulk connection (`ss -tnp`) | slirp4netns CPU during the run |\n|---|---|---|---|---|---|---|\n")
	res := suiteResult{Suite: "egress", Title: "Pods' way out (egress)", Machine: machine() + "; load average " + load}
	plot := plotSpec{File: "egress-connect.png", Title: "connect + 1-byte exchange to a server beyond the host", Kind: "cdf", XLabel: "ms"}
	host := rows[0].run.latencies()
	for _, r := range rows {
		cpu := "–"
		if r.line != "" {
			cpu = fmt.Sprintf("%.2f s", r.slirpCPU)
		}
		fmt.Fprintf(&b, "%s %s | %s |\n", latencyRow(r.from, r.run), r.owner, cpu)
		l := r.run.latencies()
		res.Figures = append(res.Figures,
			figure{Name: "connect + 1-byte exchange p50 / p99, from " + r.from, Value: usStr(percentile(l, 0.5)) + " / " + usStr(percentile(l, 0.99))},
			figure{Name: "bulk download, from " + r.from, Value: fmt.Sprintf("%.0f MiB/s", r.run.mbps())})
		plot.Series = append(plot.Series, series{Name: "from " + r.from, Values: msValues(l)})
	}
	viaSlirp := true
	for _, r := range rows[1:] {
		viaSlirp = viaSlirp && strings.HasPrefix(r.owner, "slirp4netns ")
	}
	if !viaSlirp {
		b.WriteString("\nThe host's end of a pod's connection was not always slirp4netns's (see the column above).\n\n")
	} else {
		fmt.Fprintf(&b, "\nThe way the packets take, as measured: the host's end of a pod's connection is a socket of slirp4netns "+
			"(the column above, read with `ss -tnp` in the host's namespace while the download ran), so the host's kernel never forwarded "+
			"the pod's packets; they went pod → veth → bridge in rayctl's node namespace → masquerade (nftables, `rayctl-egress`) → the tap "+
			"egress0 → slirp4netns, a user-mode TCP/IP stack reading the tap, which makes each connection again as its own socket in the "+
			"host's namespace. As root and rootless that path is the same; only slirp4netns's uid differs. Its CPU (last column, "+
			"`/proc/PID/stat` before and after each run) is the per-packet cost of that stack.\n\n")
	}
	for _, r := range rows[1:] {
		l := r.run.latencies()
		fmt.Fprintf(&b, "From %s, the way out costs %s per connection at the median (%s at p99) over the host's own; its `rayctl up` said `%s`.\n\n",
			r.from, usStr(percentile(l, 0.5)-percentile(host, 0.5)), usStr(percentile(l, 0.99)-percentile(host, 0.99)), r.line)
	}
	res.Plots = []plotSpec{plot}
	return writeSuite(out, res, b.String())
}
