package main

// Suite services: what a ClusterIP costs per connection, and what a rewrite of the Service proxy's table
// costs. In a node namespace of its own (network.Manager, as rayctl's), a server pod answers HTTP and a
// client pod connects to it, one connection per request (connect, GET, read the answer, close): to the
// server's pod IP, then through a ClusterIP (pkg/serviceproxy's table) with 1 and with 1,000 Services
// programmed. The table's rewrite is timed with 1 and with 1,000 Services (2 endpoints each). Needs root.

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

	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/serviceproxy"
)

const (
	servicesConns    = 2000 // measured connections per path
	servicesRewrites = 30   // measured rewrites per table size
	servicesMany     = 1000
)

func runServices(out string) error {
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

	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
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
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", p.name, us(percentile(p.lat, 0.5)), us(percentile(p.lat, 0.9)), us(percentile(p.lat, 0.99)))
		res.Figures = append(res.Figures, figure{Name: "connect + request, " + p.name + " (median)", Value: us(percentile(p.lat, 0.5))})
		cdf = append(cdf, series{Name: p.name, Values: msValues(p.lat)})
	}
	for i := 0; i < len(paths); i += 2 {
		diff := percentile(paths[i+1].lat, 0.5) - percentile(paths[i].lat, 0.5)
		fmt.Fprintf(&b, "\nThrough the ClusterIP, %s: %+.0f µs at the median.", strings.TrimPrefix(paths[i+1].name, "ClusterIP, "), float64(diff)/float64(time.Microsecond))
		res.Figures = append(res.Figures, figure{Name: "ClusterIP's added cost per connection, " + strings.TrimPrefix(paths[i+1].name, "ClusterIP, ") + " (median)",
			Value: fmt.Sprintf("%+.0f µs", float64(diff)/float64(time.Microsecond))})
	}
	fmt.Fprintf(&b, "\n")
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
	res.Plots = []plotSpec{{File: "services-connect.png", Title: "Connect + request: pod IP vs ClusterIP", Kind: "cdf",
		XLabel: "connect + GET + close (ms)", YLabel: "share of connections", Series: cdf}}
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
