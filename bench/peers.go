package main

// Suite peers: rayctl beside an envtest-style control plane on the same machine, in the same run —
// Debian's etcd-server and a kube-apiserver built from the k8s.io/kubernetes Go module at the Kubernetes
// version rayctl reports (bench/peers/go.mod; `make peer-apiserver`). Runs are interleaved (peer cold,
// rayctl cold, peer warm, rayctl warm, …) so that the machine's load falls on both alike.
//
// The peer is timed from the exec of etcd and kube-apiserver (started together, as envtest does) to
// /readyz answering 200, then to the ray.io CRDs Established (created the way rayctl installs them,
// apiserver.InstallCRDs); its RSS is etcd's plus kube-apiserver's, 3 s after that. rayctl is timed to
// its ready line, which comes after the same CRDs are Established and after its kubelet, DNS and
// controllers are up too: the peer does less for its time and memory.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/instance"
	"github.com/rayctl/rayctl/pkg/procstop"
	"github.com/rayctl/rayctl/test/loadgen"
)

// peerSample is one start of the peer control plane.
type peerSample struct {
	readyz  time.Duration // exec → /readyz 200
	crds    time.Duration // exec → the ray.io CRDs Established
	rssMB   float64       // etcd + kube-apiserver, 3 s after the CRDs
	etcdMB  float64
	kubeMB  float64
	version string
}

// peerPaths are the peer's binaries.
type peerPaths struct {
	etcd, kubeAPIServer string
}

func runPeers(rayctl, out string, runs int, peers peerPaths) error {
	for _, p := range []string{peers.etcd, peers.kubeAPIServer} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("suite peers needs %s (etcd: apt-get install etcd-server; kube-apiserver: make peer-apiserver): %w", p, err)
		}
	}
	load := loadAverage()
	var peerCold, peerWarm []peerSample
	var rayCold, rayWarm []sample
	for i := 0; i < runs; i++ {
		dir, err := os.MkdirTemp("", "peer-bench-")
		if err != nil {
			return err
		}
		pc, err := peerStart(dir, peers, true)
		if err != nil {
			return fmt.Errorf("peer cold start: %w", err)
		}
		rdir, err := os.MkdirTemp("", "rayctl-bench-")
		if err != nil {
			return err
		}
		args := instance.OwnNetwork([]string{"--port", "0"})
		rc, err := startOnce(rayctl, rdir, args, true, true)
		if err != nil {
			return fmt.Errorf("rayctl cold start: %w", err)
		}
		pw, err := peerStart(dir, peers, false)
		if err != nil {
			return fmt.Errorf("peer warm restart: %w", err)
		}
		rw, err := startOnce(rayctl, rdir, args, true, false)
		if err != nil {
			return fmt.Errorf("rayctl warm restart: %w", err)
		}
		os.RemoveAll(dir)
		os.RemoveAll(rdir)
		peerCold, peerWarm = append(peerCold, pc), append(peerWarm, pw)
		rayCold, rayWarm = append(rayCold, rc), append(rayWarm, rw)
		fmt.Fprintf(os.Stderr, "run %d: peer cold %v/%v warm %v/%v; rayctl cold %v warm %v\n", i+1,
			pc.readyz.Round(time.Millisecond), pc.crds.Round(time.Millisecond), pw.readyz.Round(time.Millisecond), pw.crds.Round(time.Millisecond),
			rc.wall.Round(time.Millisecond), rw.wall.Round(time.Millisecond))
	}
	med := func(v []time.Duration) time.Duration {
		v = append([]time.Duration(nil), v...)
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)/2]
	}
	peerDur := func(s []peerSample, get func(peerSample) time.Duration) (string, time.Duration) {
		var v []time.Duration
		for _, x := range s {
			v = append(v, get(x))
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return fmt.Sprintf("%d ms [%d–%d]", v[len(v)/2].Milliseconds(), v[0].Milliseconds(), v[len(v)-1].Milliseconds()), med(v)
	}
	peerRSS := func(s []peerSample) (string, float64) {
		var v []float64
		for _, x := range s {
			v = append(v, x.rssMB)
		}
		sort.Float64s(v)
		m := v[len(v)/2]
		var e, k float64
		for _, x := range s {
			if x.rssMB == m {
				e, k = x.etcdMB, x.kubeMB
			}
		}
		return fmt.Sprintf("%.0f MB [%.0f–%.0f] (etcd %.0f + kube-apiserver %.0f)", m, v[0], v[len(v)-1], e, k), m
	}
	rayMed := func(s []sample) time.Duration {
		var v []time.Duration
		for _, x := range s {
			v = append(v, x.wall)
		}
		return med(v)
	}
	rayRSSMed := func(s []sample) float64 {
		var v []float64
		for _, x := range s {
			v = append(v, x.rssMB)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# rayctl beside an envtest-style control plane (`make bench`, suite peers)\n\n")
	fmt.Fprintf(&b, "Measured %s, %d interleaved runs each; median shown, min–max in brackets. Machine: %s.\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runs, machine())
	fmt.Fprintf(&b, "Peer: %s and kube-apiserver %s (k8s.io/kubernetes built from the Go module, bench/peers/go.mod), started together as envtest starts them,\n"+
		"plain HTTP between them on loopback, client certificates for the admin; the same four ray.io CRDs created through the same code\n"+
		"(apiserver.InstallCRDs). rayctl's ready line comes after those CRDs are Established *and* its kubelet, DNS and controllers are up;\n"+
		"its RSS holds all of that in one process.\n\n", peerCold[0].version, strings.TrimPrefix(filepath.Base(peers.kubeAPIServer), "kube-apiserver-"))
	fmt.Fprintf(&b, "| measurement | peer (etcd + kube-apiserver) | rayctl | rayctl ÷ peer |\n|---|---|---|---|\n")
	coldReadyz, _ := peerDur(peerCold, func(x peerSample) time.Duration { return x.readyz })
	coldCRDs, coldCRDsMed := peerDur(peerCold, func(x peerSample) time.Duration { return x.crds })
	warmReadyz, _ := peerDur(peerWarm, func(x peerSample) time.Duration { return x.readyz })
	warmCRDs, warmCRDsMed := peerDur(peerWarm, func(x peerSample) time.Duration { return x.crds })
	coldRSS, coldRSSMed := peerRSS(peerCold)
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2f", a/b) }
	fmt.Fprintf(&b, "| cold: exec → /readyz | %s | – | – |\n", coldReadyz)
	fmt.Fprintf(&b, "| cold: exec → ray.io CRDs Established (rayctl: → ready) | %s | %s | %s |\n", coldCRDs,
		durStats(rayCold, func(x sample) time.Duration { return x.wall }), ratio(float64(rayMed(rayCold)), float64(coldCRDsMed)))
	fmt.Fprintf(&b, "| warm: exec → /readyz | %s | – | – |\n", warmReadyz)
	fmt.Fprintf(&b, "| warm: exec → ray.io CRDs Established (rayctl: → ready) | %s | %s | %s |\n", warmCRDs,
		durStats(rayWarm, func(x sample) time.Duration { return x.wall }), ratio(float64(rayMed(rayWarm)), float64(warmCRDsMed)))
	fmt.Fprintf(&b, "| RSS 3 s after (cold) | %s | %s | %s |\n", coldRSS, rssStats(rayCold), ratio(rayRSSMed(rayCold), coldRSSMed))
	fmt.Fprintf(&b, "\nPublished figures of other local Kubernetes distributions, for scale only (other machines, versions and\n"+
		"workloads; none runs here, kind, k3d and minikube need a container engine or a VM):\n\n"+
		"- k3s v1.26.5, server with a workload (Prometheus, Grafana, an nginx Deployment): minimum RAM 1596 M with Kine/SQLite,\n"+
		"  1606 M with embedded etcd, 6%% of an Intel 8375C core (https://docs.k3s.io/reference/resource-profiling).\n"+
		"- minikube: asks for 2 CPUs, 2 GB of free memory and 20 GB of disk (https://minikube.sigs.k8s.io/docs/start/).\n"+
		"- kind: no resource figure is published; a cluster is a container running a whole node image\n"+
		"  (https://kind.sigs.k8s.io/docs/user/quick-start/).\n")
	peerMed := func(s []peerSample, get func(peerSample) time.Duration) time.Duration {
		_, m := peerDur(s, get)
		return m
	}
	res := peersJSON(peersMedians{
		coldReadyz: peerMed(peerCold, func(x peerSample) time.Duration { return x.readyz }), coldCRDs: coldCRDsMed, coldRayctl: rayMed(rayCold),
		warmReadyz: peerMed(peerWarm, func(x peerSample) time.Duration { return x.readyz }), warmCRDs: warmCRDsMed, warmRayctl: rayMed(rayWarm),
		peerRSS: coldRSSMed, rayctlRSS: rayRSSMed(rayCold),
	}, runs, load)
	return writeSuite(out, res, b.String())
}

// peersMedians are the medians suite peers compares.
type peersMedians struct {
	coldReadyz, coldCRDs, coldRayctl time.Duration // peer exec → /readyz, → CRDs Established; rayctl exec → ready
	warmReadyz, warmCRDs, warmRayctl time.Duration
	peerRSS, rayctlRSS               float64 // MB, 3 s after (cold)
}

// peersJSON is peers.json: each comparison with its ratio (the issue sets no goal against the peer),
// and bars of both.
func peersJSON(m peersMedians, runs int, load string) suiteResult {
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	cmp := func(ray, peer time.Duration) string {
		return fmt.Sprintf("%s vs %s: %.2f×", sec(ray), sec(peer), ray.Seconds()/peer.Seconds())
	}
	coldRatio, warmRatio, rssRatio := m.coldRayctl.Seconds()/m.coldCRDs.Seconds(), m.warmRayctl.Seconds()/m.warmCRDs.Seconds(), m.rayctlRSS/m.peerRSS
	res := suiteResult{Suite: "peers", Title: "rayctl beside an envtest-style control plane", Machine: fmt.Sprintf("%s; load average %s; median of %d interleaved runs", machine(), load, runs),
		Figures: []figure{
			{Name: "peer cold start: exec → /readyz", Value: sec(m.coldReadyz)},
			{Name: "cold start, rayctl (→ ready) ÷ peer (→ ray.io CRDs Established)", Value: cmp(m.coldRayctl, m.coldCRDs)},
			{Name: "peer warm restart: exec → /readyz", Value: sec(m.warmReadyz)},
			{Name: "warm restart, rayctl (→ ready) ÷ peer (→ ray.io CRDs Established)", Value: cmp(m.warmRayctl, m.warmCRDs)},
			{Name: "RSS 3 s after a cold start, rayctl ÷ peer (etcd + kube-apiserver)", Value: fmt.Sprintf("%.0f MB vs %.0f MB: %.2f×", m.rayctlRSS, m.peerRSS, rssRatio)},
		}}
	s := func(v ...time.Duration) []float64 {
		out := make([]float64, len(v))
		for i, d := range v {
			out[i] = d.Seconds()
		}
		return out
	}
	res.Plots = []plotSpec{
		{File: "peers-start.png", Title: "Start to ready: rayctl beside etcd + kube-apiserver (median)", Kind: "bar", YLabel: "s",
			Categories: []string{fmt.Sprintf("cold start (rayctl ÷ peer %.2f×)", coldRatio), fmt.Sprintf("warm restart (rayctl ÷ peer %.2f×)", warmRatio)},
			Series: []series{
				{Name: "peer: exec → /readyz", Values: s(m.coldReadyz, m.warmReadyz)},
				{Name: "peer: exec → ray.io CRDs Established", Values: s(m.coldCRDs, m.warmCRDs)},
				{Name: "rayctl: exec → ready (CRDs, kubelet, controllers)", Values: s(m.coldRayctl, m.warmRayctl)},
			}},
		{File: "peers-rss.png", Title: "RSS 3 s after a cold start (median)", Kind: "bar", YLabel: "MB",
			Categories: []string{fmt.Sprintf("rayctl ÷ peer %.2f×", rssRatio)},
			Series: []series{
				{Name: "peer: etcd + kube-apiserver", Values: []float64{m.peerRSS}},
				{Name: "rayctl", Values: []float64{m.rayctlRSS}},
			}},
	}
	return res
}

// peerStart starts etcd and kube-apiserver on dir (made anew when cold), times them to /readyz and to
// the ray.io CRDs Established, samples their RSS 3 s later, and stops them.
func peerStart(dir string, peers peerPaths, cold bool) (peerSample, error) {
	var s peerSample
	keys, err := newPeerPKI(dir)
	if err != nil {
		return s, err
	}
	// etcd and kube-apiserver take ports by number only (kube-apiserver serves nothing on port 0), so
	// the ports are picked here, free a moment before the processes bind them. Another process may take
	// one in that moment; the start is then made again with fresh ports, the peer's log saying so.
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(3)
		if err != nil {
			return s, err
		}
		s, err = peerRun(dir, peers, keys, ports)
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			return s, err
		}
		fmt.Fprintf(os.Stderr, "peer: %v; starting again with fresh ports\n", err)
		if cold { // what the failed start wrote is not a cold start's
			if err := os.RemoveAll(filepath.Join(dir, "etcd")); err != nil {
				return s, err
			}
		}
	}
}

// peerPKI are the peer's CA, serving and admin key pairs, and service account public key file.
type peerPKI struct {
	ca             *pki.Authority
	serving, admin *pki.KeyPair
	saPub          string
}

// newPeerPKI makes (or loads) the peer's keys under dir/pki.
func newPeerPKI(dir string) (k peerPKI, err error) {
	if k.ca, err = pki.LoadOrCreateCA(filepath.Join(dir, "pki"), "peer-ca"); err != nil {
		return k, err
	}
	if k.serving, err = k.ca.Serving("apiserver", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return k, err
	}
	if k.admin, err = k.ca.Client("admin", "peer-admin", []string{"system:masters"}); err != nil {
		return k, err
	}
	saKey, err := k.ca.SigningKey("sa")
	if err != nil {
		return k, err
	}
	der, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return k, err
	}
	k.saPub = filepath.Join(dir, "pki", "sa.pub")
	return k, os.WriteFile(k.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
}

// errPortTaken says that a port picked by freePorts was taken before the peer bound it.
var errPortTaken = errors.New("a port picked for the peer was taken before it bound it")

// peerRun is one start of the peer on ports (etcd client, etcd peer, kube-apiserver), measured as
// peerStart says; the error wraps errPortTaken when either process could not bind its port.
func peerRun(dir string, peers peerPaths, keys peerPKI, ports []int) (peerSample, error) {
	var s peerSample
	ca, serving, admin, saPub := keys.ca, keys.serving, keys.admin, keys.saPub
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	etcd := exec.Command(peers.etcd, "--name", "peer", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "peer="+peerURL,
		"--unsafe-no-fsync=false", "--log-level", "error")
	kube := exec.Command(peers.kubeAPIServer, "--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file", serving.CertFile, "--tls-private-key-file", serving.KeyFile, "--client-ca-file", ca.CertFile(),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local", "--service-account-key-file", saPub,
		"--service-account-signing-key-file", filepath.Join(dir, "pki", "sa.key"), "--service-cluster-ip-range", "10.96.0.0/16",
		"--authorization-mode", "RBAC", "--disable-admission-plugins", "ServiceAccount", "--allow-privileged=true",
		"--endpoint-reconciler-type", "none") // the loopback address may not be a Service endpoint
	logs, err := os.Create(filepath.Join(dir, "peer.log"))
	if err != nil {
		return s, err
	}
	defer logs.Close()
	for _, c := range []*exec.Cmd{etcd, kube} {
		c.Stdout, c.Stderr = logs, logs
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	t0 := time.Now()
	etcdExited, err := startProcess(etcd)
	if err != nil {
		return s, err
	}
	defer stopProcess(etcd, etcdExited)
	kubeExited, err := startProcess(kube)
	if err != nil {
		return s, err
	}
	defer stopProcess(kube, kubeExited)

	cfg := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", ports[2]), TLSClientConfig: rest.TLSClientConfig{
		CAFile: ca.CertFile(), CertFile: admin.CertFile, KeyFile: admin.KeyFile}}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return s, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		// Either process exiting ends the wait at once, its log saying why.
		select {
		case <-etcdExited:
		case <-kubeExited:
		case <-ctx.Done():
		}
		cancel()
	}()
	if err := waitReadyz(ctx, cfg.Host, tlsCfg); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "peer.log"))
		if strings.Contains(string(b), "address already in use") {
			err = fmt.Errorf("%w (%w)", errPortTaken, err)
		}
		return s, fmt.Errorf("%w\n%s", err, tail(string(b), 3000))
	}
	s.readyz = time.Since(t0)
	crds, err := configs.CRDManifests(configs.RayGroup)
	if err != nil {
		return s, err
	}
	if err := apiserver.InstallCRDs(ctx, cfg, crds); err != nil {
		return s, fmt.Errorf("installing the ray.io CRDs on the peer: %w", err)
	}
	s.crds = time.Since(t0)
	time.Sleep(3 * time.Second)
	s.etcdMB, s.kubeMB = loadgen.RSSMB(etcd.Process.Pid), loadgen.RSSMB(kube.Process.Pid)
	s.rssMB = s.etcdMB + s.kubeMB
	if v, err := exec.Command(peers.etcd, "--version").Output(); err == nil {
		s.version = "etcd " + strings.TrimPrefix(strings.TrimSpace(strings.SplitN(string(v), "\n", 2)[0]), "etcd Version: ")
	}
	return s, nil
}

// waitReadyz polls host's /readyz until it answers 200.
func waitReadyz(ctx context.Context, host string, tlsCfg *tls.Config) error {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: time.Second}
	var last string
	for {
		res, err := c.Get(host + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/readyz: not 200 in time (last: %s)", host, last)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// freePorts returns n loopback ports free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startProcess starts c and returns a channel closed when it has exited.
func startProcess(c *exec.Cmd) (<-chan struct{}, error) {
	if err := c.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = c.Wait(); close(exited) }()
	return exited, nil
}

// stopProcess ends c, started by startProcess, with SIGTERM, then SIGKILL after 30 s.
func stopProcess(c *exec.Cmd, exited <-chan struct{}) {
	procstop.Child(c.Process.Pid, false, exited, 30*time.Second)
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
