package main

// Suite egress: what pods' way out of the node costs (package egress: slirp4netns in the node
// namespace). A "world" beyond the host — a network namespace of the bench's own behind a veth, which
// the host routes to as to a LAN — answers a one-byte exchange per connection and streams 256 MiB on
// another port. The same Python client (the venv `make ray` builds) measures it from the host, then from a
// pod of `rayctl up` (root, process runtime: a network namespace per pod), whose connections go through
// the node namespace's NAT and slirp4netns. Needs root.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

const (
	egressConns    = 1000
	egressBulk     = 256 << 20
	egressNS       = "egress-bench"
	egressWorldNS  = "rayctl-bench-world"
	egressWorldDev = "rbworld0"
	egressHostIP   = "198.19.77.1"
	egressWorldIP  = "198.19.77.2"
)

// egressClient is the Python client: argv host port bulkport n; prints JSON {us: [...], bytes, secs}.
const egressClient = `import json, socket, sys, time
host, port, bulk, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
us = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection((host, port))
    s.sendall(b"x")
    s.recv(1)
    s.close()
    us.append((time.perf_counter() - t) * 1e6)
t = time.perf_counter()
s = socket.create_connection((host, bulk))
got = 0
while True:
    b = s.recv(1 << 20)
    if not b:
        break
    got += len(b)
print(json.dumps({"us": us, "bytes": got, "secs": time.perf_counter() - t}))
`

// egressRun is what the client measured from one place.
type egressRun struct {
	US    []float64 `json:"us"`
	Bytes int64     `json:"bytes"`
	Secs  float64   `json:"secs"`
}

func (r egressRun) latencies() []time.Duration {
	out := make([]time.Duration, len(r.US))
	for i, us := range r.US {
		out[i] = time.Duration(us * float64(time.Microsecond))
	}
	return out
}

func (r egressRun) mbps() float64 { return float64(r.Bytes) / (1 << 20) / r.Secs }

func runEgress(rayctl, out string) error {
	if os.Geteuid() != 0 {
		return errors.New("egress: the world namespace and the pod network need root")
	}
	python := filepath.Join(filepath.Dir(rayctl), "..", "ray", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		return fmt.Errorf("egress: the client runs on the venv make ray builds: %w", err)
	}
	stopWorld, err := startWorld()
	defer stopWorld()
	if err != nil {
		return fmt.Errorf("egress: the world namespace: %w", err)
	}
	args := []string{egressWorldIP, "8080", "8081", fmt.Sprint(egressConns)}
	b, err := exec.Command(python, append([]string{"-c", egressClient}, args...)...).Output()
	if err != nil {
		return fmt.Errorf("egress: the client on the host: %w", err)
	}
	var host egressRun
	if err := json.Unmarshal(b, &host); err != nil {
		return err
	}
	pod, line, err := egressFromPod(rayctl, args)
	if err != nil {
		return err
	}
	return writeEgress(out, host, pod, line)
}

// startWorld makes the world namespace, its veth and its two servers; the function returned removes them.
func startWorld() (func(), error) {
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
			for sent := 0; sent < egressBulk; sent += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}))
	return stop, err
}

// egressFromPod runs the client in a pod of a fresh `rayctl up` and returns what it measured and the
// instance's egress line.
func egressFromPod(rayctl string, args []string) (egressRun, string, error) {
	var res egressRun
	dir, err := os.MkdirTemp("", "rayctl-bench-egress-")
	if err != nil {
		return res, "", err
	}
	defer removeInstance(rayctl, dir)
	up, err := startUp(rayctl, dir, "--runtime", "process")
	if err != nil {
		return res, "", fmt.Errorf("egress: %w", err)
	}
	defer up.Stop(time.Minute)
	line := ""
	for _, l := range up.Startup {
		if strings.HasPrefix(strings.TrimSpace(l), "egress") {
			line = strings.TrimSpace(l)
		}
	}
	kube, _, err := clients(up, 50, 100)
	if err != nil {
		return res, line, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := podNamespace(ctx, kube, egressNS); err != nil {
		return res, line, err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "client", Image: "rayproject/ray:2.60.0",
			Command: append([]string{"python", "-c", egressClient}, args...)}},
	}}
	if _, err := kube.CoreV1().Pods(egressNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return res, line, err
	}
	var phase corev1.PodPhase
	if err := poll(ctx, 10*time.Minute, func() bool {
		p, err := kube.CoreV1().Pods(egressNS).Get(ctx, "client", metav1.GetOptions{})
		if err == nil {
			phase = p.Status.Phase
		}
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed
	}); err != nil {
		return res, line, fmt.Errorf("egress: the client pod: %w", err)
	}
	logs, err := kube.CoreV1().Pods(egressNS).GetLogs("client", &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return res, line, err
	}
	defer logs.Close()
	b, err := io.ReadAll(logs)
	if err != nil {
		return res, line, err
	}
	if phase != corev1.PodSucceeded {
		return res, line, fmt.Errorf("egress: the client pod failed (%s): %s", line, b)
	}
	return res, line, json.Unmarshal(b, &res)
}

func writeEgress(out string, host, pod egressRun, line string) error {
	hl, pl := host.latencies(), pod.latencies()
	row := func(name string, l []time.Duration, r egressRun) string {
		return fmt.Sprintf("| %s | %s | %s | %s | %.0f MiB/s |\n", name, usStr(percentile(l, 0.5)), usStr(percentile(l, 0.9)),
			usStr(percentile(l, 0.99)), r.mbps())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Pods' way out (egress)\n\nMeasured %s on %s.\n\n", time.Now().UTC().Format(time.RFC3339), machine())
	fmt.Fprintf(&b, "A server beyond the host (a network namespace behind a veth, routed like a LAN) answers a one-byte exchange "+
		"per TCP connection (%d connections, one after another) and streams %d MiB on another. The same Python client runs on "+
		"the host and in a pod of `rayctl up` as root (`%s`).\n\n", egressConns, egressBulk>>20, line)
	b.WriteString("| from | connect + 1-byte exchange p50 | p90 | p99 | bulk download |\n|---|---|---|---|---|\n")
	b.WriteString(row("the host", hl, host))
	b.WriteString(row("a pod (node namespace NAT + slirp4netns)", pl, pod))
	fmt.Fprintf(&b, "\nPer connection, the way out costs %s at the median (%s at p99).\n",
		usStr(percentile(pl, 0.5)-percentile(hl, 0.5)), usStr(percentile(pl, 0.99)-percentile(hl, 0.99)))
	res := suiteResult{Suite: "egress", Title: "Pods' way out (egress)", Machine: machine(), Figures: []figure{
		{Name: "connect + 1-byte exchange p50, host / pod through egress", Value: usStr(percentile(hl, 0.5)) + " / " + usStr(percentile(pl, 0.5))},
		{Name: "connect + 1-byte exchange p99, host / pod through egress", Value: usStr(percentile(hl, 0.99)) + " / " + usStr(percentile(pl, 0.99))},
		{Name: "bulk download, host / pod through egress", Value: fmt.Sprintf("%.0f / %.0f MiB/s", host.mbps(), pod.mbps())},
	}, Plots: []plotSpec{{File: "egress-connect.png", Title: "connect + 1-byte exchange to a server beyond the host", Kind: "cdf", XLabel: "ms",
		Series: []series{{Name: "from the host", Values: msValues(hl)}, {Name: "from a pod (egress)", Values: msValues(pl)}}}}}
	return writeSuite(out, res, b.String())
}

// usStr is a duration in microseconds.
func usStr(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}
