// Package probe runs a container's startup, readiness and liveness probes (exec, httpGet, tcpSocket,
// grpc) on their schedule and reports when a probe's verdict changes, applying initialDelaySeconds,
// periodSeconds, timeoutSeconds, successThreshold and failureThreshold as the kubelet does.
package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// Kind is which of a container's probes this is.
type Kind string

// The three probe kinds, spelt as in events ("Liveness probe failed: …").
const (
	Startup   Kind = "Startup"
	Readiness Kind = "Readiness"
	Liveness  Kind = "Liveness"
)

// Result is a probe's verdict.
type Result int

// Verdicts. Unknown is the state before a threshold has been reached for the first time.
const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	}
	return "unknown"
}

// Target is the container a probe checks.
type Target struct {
	// ContainerID is the runtime's id, for exec probes.
	ContainerID string
	// PodIP is the default host of httpGet, tcpSocket and grpc probes.
	PodIP string
	// NetNSPath is the pod's network namespace, which httpGet, tcpSocket and grpc probes connect from
	// (the host's namespace has no route to pods); empty for a pod on the host's network.
	NetNSPath string
	// Container is the spec, for named ports.
	Container *corev1.Container
}

// Prober runs single probe attempts.
type Prober struct {
	// Runtime runs exec probes.
	Runtime runtime.Runtime
	// UserAgent is sent by httpGet probes; empty means "kube-probe/<unknown>".
	UserAgent string
	// AlwaysSucceed passes every probe without trying it: the pods of simulated nodes have no process
	// to ask.
	AlwaysSucceed bool
}

// maxOutput bounds the probe output kept for events.
const maxOutput = 10 * 1024

// Run makes one attempt of p against t within the probe's timeout and returns whether it passed and
// a message describing a failure.
func (pr *Prober) Run(ctx context.Context, p *corev1.Probe, t Target) (bool, string) {
	if pr.AlwaysSucceed {
		return true, ""
	}
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.Exec != nil:
		return pr.exec(ctx, p.Exec, t, timeout)
	case p.HTTPGet != nil:
		return pr.httpGet(ctx, p.HTTPGet, t)
	case p.TCPSocket != nil:
		host := p.TCPSocket.Host
		if host == "" {
			host = t.PodIP
		}
		port, err := resolvePort(p.TCPSocket.Port, t.Container)
		if err != nil {
			return false, err.Error()
		}
		conn, err := t.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, fmt.Sprintf("dial tcp %s: %v", net.JoinHostPort(host, strconv.Itoa(port)), unwrapOp(err))
		}
		conn.Close()
		return true, ""
	case p.GRPC != nil:
		return grpcCheck(ctx, p.GRPC, t)
	}
	return false, "probe has no handler"
}

func (pr *Prober) exec(ctx context.Context, e *corev1.ExecAction, t Target, timeout time.Duration) (bool, string) {
	var out limitedBuffer
	code, err := pr.Runtime.Exec(ctx, t.ContainerID, e.Command, runtime.ExecIO{Stdout: &out, Stderr: &out})
	if ctx.Err() != nil {
		return false, fmt.Sprintf("command %q timed out after %s", strings.Join(e.Command, " "), timeout)
	}
	if err != nil {
		return false, err.Error()
	}
	if code != 0 {
		if out.Len() == 0 {
			return false, fmt.Sprintf("command %q exited with %d", strings.Join(e.Command, " "), code)
		}
		return false, out.String()
	}
	return true, ""
}

func (pr *Prober) httpGet(ctx context.Context, h *corev1.HTTPGetAction, t Target) (bool, string) {
	host := h.Host
	if host == "" {
		host = t.PodIP
	}
	port, err := resolvePort(h.Port, t.Container)
	if err != nil {
		return false, err.Error()
	}
	scheme := strings.ToLower(string(h.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if p, q, ok := strings.Cut(path, "?"); ok {
		u.Path, u.RawQuery = p, q
	} else {
		u.Path = path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	ua := pr.UserAgent
	if ua == "" {
		ua = "kube-probe/<unknown>"
	}
	req.Header.Set("User-Agent", ua)
	req.Header.Set("Accept", "*/*")
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true, Proxy: nil, DialContext: t.dial},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 || req.URL.Hostname() != u.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Sprintf("Get %q: %v", u.String(), unwrapOp(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxOutput))
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

// dial connects to addr from the pod's network namespace (the host's for a pod on the host's network).
func (t Target) dial(ctx context.Context, network_, addr string) (net.Conn, error) {
	return network.DialIn(ctx, t.NetNSPath, network_, addr)
}

func grpcCheck(ctx context.Context, g *corev1.GRPCAction, t Target) (bool, string) {
	addr := net.JoinHostPort(t.PodIP, strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return t.dial(ctx, "tcp", addr) }))
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close()
	svc := ""
	if g.Service != nil {
		svc = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		return false, fmt.Sprintf("failed to connect service %q within %v: %v", addr, time.Until(deadline(ctx)), err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return false, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus())
	}
	return true, ""
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// resolvePort turns a probe port (a number or a container port name) into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if c != nil {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container", p.StrVal)
}

// limitedBuffer keeps the first maxOutput bytes written to it.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}
