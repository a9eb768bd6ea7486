package main

// Suite services: what a ClusterIP costs per connection, and what a rewrite of the Service proxy's table
// costs. In a node namespace of its own (network.Manager, as rayctl's), a server pod answers HTTP and a
// client pod connects to it, one connection per request (connect, GET, read the answer, close): to the
// server's pod IP, then through a ClusterIP (pkg/serviceproxy's table) with 1 and with 1,000 Services
// programmed. The table's rewrite is timed with 1 and with 1,000 Services (2 endpoints each). Then the
// same comparison through `rayctl up` itself, as root and as the laptop user (rootless), on the process
// runtime: a server pod behind a Service, a client pod (netclient.go) connecting to the server's pod IP
// and to the ClusterIP in turns, and downloading through each. Needs root.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/serviceproxy"
)

const (
	servicesConns    = 2000 // measured connections per path
	servicesRewrites = 30   // measured rewrites per table size
	servicesMany     = 1000
)

func runServices(rayctl, out string) error {
	if os.Geteuid() != 0 {
		return errors.New("suite services: needs root (a network namespace, nftables)")
	}
	loadBefore := loadAverage()
	dir, err := os.MkdirTemp("", "rayctl-bench-services-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m, err := network.New(network.Config{StateDir: filepath.Join(dir, "network"), Bridge: "rbsvc0", CIDR: "10.252.0.0/24"})
	if err != nil {
		return err
	}
	defer func() { _, _ = m.Cleanup(nil); _ = m.RemoveBridge() }()
	srv, err := m.Setup("server")
	if err != nil {
		return err
	}
	cli, err := m.Setup("client")
	if err != nil {
		return err
	}
	other, err := m.Setup("other")
	if err != nil {
		return err
	}
	var ln net.Listener
	if err := network.Do(srv.NetNSPath, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(srv.IP.String(), "8080"))
		return err
	}); err != nil {
		return err
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go hs.Serve(ln)
	defer hs.Close()

	_, cidr, _ := net.ParseCIDR("10.96.0.0/16")
	table, err := serviceproxy.OpenTable(serviceproxy.TableOptions{NetNS: m.NodeNSPath(), Bridge: "rbsvc0", Gateway: m.Gateway(), ServiceCIDR: cidr})
	if err != nil {
		return err
	}
	defer table.Close()
	target := serviceproxy.Port{Service: "bench/target", IP: net.IPv4(10, 96, 0, 10), Protocol: corev1.ProtocolTCP, Port: 80,
		Endpoints: []serviceproxy.Endpoint{{IP: srv.IP, Port: 8080}}}
	many := []serviceproxy.Port{target}
	for i := 0; len(many) < servicesMany; i++ {
		ip := net.IPv4(10, 96, byte(1+i/250), byte(1+i%250))
		many = append(many, serviceproxy.Port{Service: fmt.Sprintf("bench/s%d", i), IP: ip, Protocol: corev1.ProtocolTCP, Port: 80,
			Endpoints: []serviceproxy.Endpoint{{IP: srv.IP, Port: 8080}, {IP: other.IP, Port: 8080}}})
	}

	type path struct {
		name  string
		addr  string
		ports []serviceproxy.Port
		lat   []time.Duration
	}
	podAddr := net.JoinHostPort(srv.IP.String(), "8080")
	paths := []*path{
		{name: "pod IP, direct", addr: podAddr, ports: []serviceproxy.Port{target}},
		{name: "ClusterIP, 1 Service", addr: "10.96.0.10:80", ports: []serviceproxy.Port{target}},
		{name: "pod IP, direct, 1,000 Services programmed", addr: podAddr, ports: many},
		{name: "ClusterIP, 1,000 Services programmed", addr: "10.96.0.10:80", ports: many},
	}
	// The two paths of one table are measured in turns (direct, ClusterIP, direct, …), so that the machine's
	// other load falls on both alike.
	for i := 0; i < len(paths); i += 2 {
		pair := paths[i : i+2]
		if err := table.Write(pair[0].ports); err != nil {
			return err
		}
		for k := 0; k < 50+servicesConns; k++ {
			for _, p := range pair {
				d, err := oneRequest(cli.NetNSPath, p.addr)
				if err != nil {
					return fmt.Errorf("%s: %w", p.name, err)
				}
				if k >= 50 { // after 50 to warm up (ARP, conntrack)
					p.lat = append(p.lat, d)
				}
			}
		}
	}
	rewrite := map[int][]time.Duration{}
	for _, ports := range [][]serviceproxy.Port{{target}, many} {
		for i := 0; i < servicesRewrites; i++ {
			t0 := time.Now()
			if err := table.Write(ports); err != nil {
				return err
			}
			rewrite[len(ports)] = append(rewrite[len(ports)], time.Since(t0))
		}
	}

	upRuns, err := servicesThroughUp(rayctl)
	if err != nil {
		return fmt.Errorf("services through rayctl up: %w", err)
	}

	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	var b strings.Builder
	fmt.Fprintf(&b, "# Services: ClusterIP cost per connection and table rewrites\n\n")
	fmt.Fprintf(&b, "Measured %s. Machine: %s; load average %s when the suite started, %s when it ended.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), machine(), loadBefore, loadAverage())
	fmt.Fprintf(&b, "One connection per request from a client pod to a server pod (Go's HTTP server) on rayctl's pod network "+
		"(a node namespace with a bridge, as `rayctl up` makes it): connect, `GET /`, read the answer, close; %d "+
		"connections per row after 50 to warm up, the direct and the ClusterIP connections of one table in turns. Through a ClusterIP the first packet of each connection goes through "+
		"pkg/serviceproxy's nftables table (a verdict map by ClusterIP, protocol and port; DNAT), the rest through "+
		"conntrack. The 1,000 Services have 2 endpoints each.\n\n", servicesConns)
	fmt.Fprintf(&b, "| path | median | p90 | p99 |\n|---|---|---|---|\n")
	res := suiteResult{Suite: "services", Title: "Services: ClusterIP cost per connection and table rewrites", Machine: machine() + "; load average " + loadBefore}
	var cdf []series
	for _, p := range paths {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", p.name, usStr(percentile(p.lat, 0.5)), usStr(percentile(p.lat, 0.9)), usStr(percentile(p.lat, 0.99)))
		res.Figures = append(res.Figures, figure{Name: "connect + request, " + p.name + " (median)", Value: usStr(percentile(p.lat, 0.5))})
		cdf = append(cdf, series{Name: p.name, Values: msValues(p.lat)})
	}
	for i := 0; i < len(paths); i += 2 {
		diff := percentile(paths[i+1].lat, 0.5) - percentile(paths[i].lat, 0.5)
		fmt.Fprintf(&b, "\nThrough the ClusterIP, %s: %+.0f µs at the median.", strings.TrimPrefix(paths[i+1].name, "ClusterIP, "), float64(diff)/float64(time.Microsecond))
		res.Figures = append(res.Figures, figure{Name: "ClusterIP's added cost per connection, " + strings.TrimPrefix(paths[i+1].name, "ClusterIP, ") + " (median)",
			Value: fmt.Sprintf("%+.0f µs", float64(diff)/float64(time.Microsecond))})
	}
	fmt.Fprintf(&b, "\n")
	writeServicesUp(&b, &res, upRuns)
	fmt.Fprintf(&b, "\nRewriting the whole table (one nftables transaction: delete and re-create), %d times each:\n\n", servicesRewrites)
	fmt.Fprintf(&b, "| Services | median | max |\n|---|---|---|\n")
	for _, n := range []int{1, servicesMany} {
		fmt.Fprintf(&b, "| %d | %s | %s |\n", n, ms(percentile(rewrite[n], 0.5)), ms(percentile(rewrite[n], 1)))
		what := fmt.Sprintf("%d Services", n)
		if n == 1 {
			what = "1 Service"
		}
		res.Figures = append(res.Figures, figure{Name: "table rewrite, " + what + " (median)", Value: ms(percentile(rewrite[n], 0.5))})
	}
	res.Plots = append([]plotSpec{{File: "services-connect.png", Title: "Connect + request: pod IP vs ClusterIP", Kind: "cdf",
		XLabel: "connect + GET + close (ms)", YLabel: "share of connections", Series: cdf}}, res.Plots...)
	return writeSuite(out, res, b.String())
}

// oneRequest connects from the namespace at ns to addr, sends one HTTP request, reads the answer and closes.
func oneRequest(ns, addr string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t0 := time.Now()
	c, err := network.DialIn(ctx, ns, "tcp4", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(t0), nil
}

// servicesModes are the ways the second part of suite services runs `rayctl up`.
var servicesModes = []upMode{processRoot, processRootless}

// servicesRounds is how many client pods, in turns over servicesModes, measure the second part.
const servicesRounds = 4

// servicesThroughUp starts a `rayctl up` in each of servicesModes, runs in each a server pod and a
// Service in front of it, then client pods in rounds, one instance after the other in each round. It
// returns, per mode, what the clients measured to the pod IP and to the ClusterIP, in that order.
func servicesThroughUp(rayctl string) ([][]connRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const ns = "services-bench"
	insts, stop, err := startModes(ctx, rayctl, "services", ns, servicesModes)
	defer stop()
	if err != nil {
		return nil, err
	}
	targets := make([][]string, len(insts))
	for i, in := range insts {
		if targets[i], err = serveBehindService(ctx, in, ns); err != nil {
			return nil, fmt.Errorf("%s: %w", in.mode.who(), err)
		}
	}
	runs := make([][]connRun, len(insts))
	for round := range servicesRounds {
		for i, in := range insts {
			r, err := podClient(ctx, in.kube, ns, fmt.Sprintf("client-%d", round), servicesConns/servicesRounds, targets[i]...)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", in.mode.who(), err)
			}
			if runs[i] == nil {
				runs[i] = make([]connRun, len(r))
			}
			for k := range r {
				runs[i][k].add(r[k])
			}
		}
	}
	return runs, nil
}

// serveBehindService runs the server pod in ns with a Service in front of it and returns the client's
// targets: the pod IP's, then the ClusterIP's. The client retries its first connection to each until it
// is answered (the server listening, the ClusterIP's endpoint programmed).
func serveBehindService(ctx context.Context, in *upInstance, ns string) ([]string, error) {
	labels := map[string]string{"app": "server"}
	server, err := pyPod("server", labels, "-c", connServer, fmt.Sprint(egressBulk))
	if err != nil {
		return nil, err
	}
	server.Spec.Containers[0].Env = append(server.Spec.Containers[0].Env, corev1.EnvVar{Name: "POD_IP",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	if _, err := in.kube.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "server"}, Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
		{Name: "echo", Port: 8080, TargetPort: intstr.FromInt32(8080)}, {Name: "bulk", Port: 8081, TargetPort: intstr.FromInt32(8081)}}}}
	if svc, err = in.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	podIP := ""
	if err := poll(ctx, 2*time.Minute, func() bool {
		p, err := in.kube.CoreV1().Pods(ns).Get(ctx, "server", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			podIP = p.Status.PodIP
		}
		return podIP != ""
	}); err != nil {
		return nil, fmt.Errorf("the server pod is not running (see %s): %w", filepath.Join(in.dir, "rayctl.log"), err)
	}
	return []string{podIP + ":8080:8081", svc.Spec.ClusterIP + ":8080:8081"}, nil
}

// writeServicesUp adds the second part's table and figures: runs holds, per servicesModes, the runs to
// the pod IP and to the ClusterIP.
func writeServicesUp(b *strings.Builder, res *suiteResult, runs [][]connRun) {
	fmt.Fprintf(b, "\n## Through `rayctl up`, as root and rootless\n\n")
	fmt.Fprintf(b, "Two fresh `rayctl up` (`%s`) side by side: one as root, one run by the ordinary user rayctl-laptop (uid 4242: rayctl's "+
		"node namespace, bridge and nftables tables inside a user namespace of its own). In each, a server pod (the host's python3: "+
		"a one-byte echo per connection on 8080, %d MiB on 8081) behind a ClusterIP Service, and a client pod (bench/netclient.go) that "+
		"connects to the server's pod IP and to the ClusterIP in turns (connect, send a byte, read it back, close), then downloads through each. "+
		"%d client pods per instance, the two instances' in turns, each %d connections per path after %d to "+
		"warm up (%d per path in all).\n\n", strings.Join(processRoot.args, " "), egressBulk>>20, servicesRounds, servicesConns/servicesRounds, netConnWarmup, servicesConns)
	b.WriteString("| mode, path | connect + 1-byte exchange p50 | p90 | p99 | bulk |\n|---|---|---|---|---|\n")
	plot := plotSpec{File: "services-up-connect.png", Title: "Connect + 1-byte exchange through rayctl up: pod IP vs ClusterIP, root vs rootless",
		Kind: "cdf", XLabel: "ms", YLabel: "share of connections"}
	for i, m := range servicesModes {
		for k, path := range []string{"pod IP", "ClusterIP"} {
			name := m.who() + ", " + path
			l := runs[i][k].latencies()
			fmt.Fprintln(b, latencyRow(name, runs[i][k]))
			res.Figures = append(res.Figures, figure{Name: "through rayctl up, " + name + ": connect + 1-byte exchange p50 / p99, bulk",
				Value: fmt.Sprintf("%s / %s, %.0f MiB/s", usStr(percentile(l, 0.5)), usStr(percentile(l, 0.99)), runs[i][k].mbps())})
			plot.Series = append(plot.Series, series{Name: name, Values: msValues(l)})
		}
	}
	b.WriteString("\n")
	for i, m := range servicesModes {
		d := percentile(runs[i][1].latencies(), 0.5) - percentile(runs[i][0].latencies(), 0.5)
		fmt.Fprintf(b, "Through the ClusterIP, %s: %+.0f µs at the median.\n", m.who(), float64(d)/float64(time.Microsecond))
	}
	res.Plots = append(res.Plots, plot)
}
