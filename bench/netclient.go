package main

// The client and server of suites egress and services: Python run by the system's python3 (hostPython3),
// on the host or in a pod of the process runtime (which pulls no image: a pod runs the host's program its
// command names, in the pod's own network namespace), so that the host and every mode measure with the
// same program.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// netConnWarmup connections per target go first and are not counted (ARP, conntrack, the ClusterIP's
	// table programmed: the first one is retried until it connects, for up to a minute).
	netConnWarmup = 50
	// netImage is the client's and server's image: on the process runtime, the host's python3 runs.
	netImage = "docker.io/library/python:3-slim"
)

// connClient is the client: argv n warmup target…, each target host:port:bulkport. Per round it makes one
// connection to each target in turn (connect, send a byte, read it back, close); after the rounds it
// downloads what each target's bulk port sends. It prints a JSON list, one {us: [...], bytes, secs} per
// target.
const connClient = `import json, socket, sys, time
n, warm, targets = int(sys.argv[1]), int(sys.argv[2]), [t.rsplit(":", 2) for t in sys.argv[3:]]
def once(host, port):
    t = time.perf_counter()
    s = socket.create_connection((host, int(port)))
    s.sendall(b"x")
    s.recv(1)
    s.close()
    return (time.perf_counter() - t) * 1e6
deadline = time.monotonic() + 60
for host, port, _ in targets:
    while True:
        try:
            once(host, port)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
us = [[] for _ in targets]
for i in range(warm + n):
    for k, (host, port, _) in enumerate(targets):
        d = once(host, port)
        if i >= warm:
            us[k].append(d)
out = []
for k, (host, _, bulk) in enumerate(targets):
    t = time.perf_counter()
    s = socket.create_connection((host, int(bulk)))
    got = 0
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        got += len(b)
    out.append({"us": us[k], "bytes": got, "secs": time.perf_counter() - t})
print(json.dumps(out))
`

// connServer is the server in a pod: argv bulkbytes; on the pod IP (env POD_IP, from the downward API)
// port 8080 it answers each connection's byte with that byte, on 8081 it sends bulkbytes (whole MiB), one
// connection at a time on each.
const connServer = `import os, socket, sys, threading
bulk = int(sys.argv[1]) >> 20
chunk = b"\0" * (1 << 20)
def echo(c):
    b = c.recv(1)
    if b:
        c.sendall(b)
def stream(c):
    for _ in range(bulk):
        c.sendall(chunk)
def serve(port, handle):
    ln = socket.create_server((os.environ["POD_IP"], port), backlog=128)
    while True:
        c, _ = ln.accept()
        try:
            handle(c)
        except OSError:
            pass
        c.close()
threading.Thread(target=serve, args=(8081, stream), daemon=True).start()
serve(8080, echo)
`

// connRun is what the client measured against one target.
type connRun struct {
	US    []float64 `json:"us"`
	Bytes int64     `json:"bytes"`
	Secs  float64   `json:"secs"`
}

// add adds o's connections and download to r's.
func (r *connRun) add(o connRun) {
	r.US = append(r.US, o.US...)
	r.Bytes += o.Bytes
	r.Secs += o.Secs
}

func (r connRun) latencies() []time.Duration {
	out := make([]time.Duration, len(r.US))
	for i, us := range r.US {
		out[i] = time.Duration(us * float64(time.Microsecond))
	}
	return out
}

func (r connRun) mbps() float64 { return float64(r.Bytes) / (1 << 20) / r.Secs }

// clientArgs are python3's arguments for the client: n counted connections per target.
func clientArgs(n int, targets ...string) []string {
	return append([]string{"-c", connClient, fmt.Sprint(n), fmt.Sprint(netConnWarmup)}, targets...)
}

// hostPython3 is the system's python3, which the client and server run on, named by its path: the process
// runtime looks a bare name up in rayctl's own PATH, where one under /root (pyenv) may come first, which
// neither the pod user nor the laptop user may run.
func hostPython3() (string, error) {
	for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		if p := filepath.Join(dir, "python3"); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no python3 in /usr/local/bin, /usr/bin or /bin: the network suites' client and server run on it")
}

// hostClient runs the client on the host.
func hostClient(n int, targets ...string) ([]connRun, error) {
	python, err := hostPython3()
	if err != nil {
		return nil, err
	}
	b, err := exec.Command(python, clientArgs(n, targets...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("the client on the host: %w", err)
	}
	var runs []connRun
	return runs, json.Unmarshal(b, &runs)
}

// pyPod is a pod whose one container runs hostPython3 with args.
func pyPod(name string, labels map[string]string, args ...string) (*corev1.Pod, error) {
	python, err := hostPython3()
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: name, Image: netImage, Command: append([]string{python}, args...)}},
	}}, err
}

// podClient runs the client in pod name of ns until it ends and returns what it measured.
func podClient(ctx context.Context, kube kubernetes.Interface, ns, name string, n int, targets ...string) ([]connRun, error) {
	pod, err := pyPod(name, nil, clientArgs(n, targets...)...)
	if err != nil {
		return nil, err
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	var phase corev1.PodPhase
	if err := poll(ctx, 10*time.Minute, func() bool {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			phase = p.Status.Phase
		}
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed
	}); err != nil {
		return nil, fmt.Errorf("the client pod: %w", err)
	}
	logs, err := kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	b, err := io.ReadAll(logs)
	if err != nil {
		return nil, err
	}
	if phase != corev1.PodSucceeded {
		return nil, fmt.Errorf("the client pod failed: %s", b)
	}
	var runs []connRun
	return runs, json.Unmarshal(b, &runs)
}

// latencyRow is a table row: name, p50, p90, p99 and the bulk throughput of r.
func latencyRow(name string, r connRun) string {
	l := r.latencies()
	return fmt.Sprintf("| %s | %s | %s | %s | %.0f MiB/s |", name, usStr(percentile(l, 0.5)), usStr(percentile(l, 0.9)),
		usStr(percentile(l, 0.99)), r.mbps())
}

// usStr is a duration in microseconds.
func usStr(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// isExecutable reports whether path is a regular file someone may run.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
