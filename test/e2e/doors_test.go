package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// probeEnv, set in the environment of the test binary, makes it probe the addresses it names (comma
// separated) and print one JSON answer per line instead of running tests (see TestMain).
const probeEnv = "RAYCTL_E2E_PROBE"

// unprivileged is the user the probes run as: nobody, which holds nothing of rayctl's.
const unprivileged = 65534

// probeAnswer is what one TCP port answered a client without credentials.
type probeAnswer struct {
	Addr   string `json:"addr"`
	Answer string `json:"answer"`
	// Closed says the port gave nothing: refused, closed at once, or demanded a certificate.
	Closed bool `json:"closed"`
	// HTTPStatus is the status of an HTTPS answer (0 when there was none).
	HTTPStatus int `json:"httpStatus"`
}

// probeMain probes each address of addrs and prints the answers; it returns the exit code.
func probeMain(addrs string) int {
	enc := json.NewEncoder(os.Stdout)
	for _, a := range strings.Split(addrs, ",") {
		if err := enc.Encode(probe(a)); err != nil {
			return 1
		}
	}
	return 0
}

// probe tries addr as a client with no certificate would: TLS and then an HTTP request for Secrets,
// and, where the port does not speak TLS, the same request in plain HTTP.
func probe(addr string) probeAnswer {
	ans := probeAnswer{Addr: addr}
	request := "GET /api/v1/secrets HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n"
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		ans.Answer, ans.Closed = "connection refused: "+err.Error(), true
		return ans
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"})
	err = tc.Handshake()
	var line string
	if err == nil {
		if _, err = io.WriteString(tc, request); err == nil {
			line, err = bufio.NewReader(tc).ReadString('\n')
		}
	}
	tc.Close()
	var notTLS tls.RecordHeaderError
	switch {
	case err == nil || (line != "" && errors.Is(err, io.EOF)):
		ans.Answer = "TLS, then " + strings.TrimSpace(line)
		if f := strings.Fields(line); len(f) > 1 {
			ans.HTTPStatus, _ = strconv.Atoi(f[1])
		}
		return ans
	case strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "bad certificate"):
		ans.Answer, ans.Closed = "TLS demands a client certificate: "+err.Error(), true
		return ans
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		ans.Answer, ans.Closed = "closed at once: "+err.Error(), true
		return ans
	case !errors.As(err, &notTLS):
		ans.Answer = "TLS failed: " + err.Error()
		return ans
	}
	// Not TLS: what does it answer in the clear?
	conn, err = net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		ans.Answer, ans.Closed = "not TLS; then refused: "+err.Error(), true
		return ans
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(conn, request)
	b := make([]byte, 256)
	n, err := conn.Read(b)
	if n == 0 {
		ans.Answer, ans.Closed = fmt.Sprintf("not TLS; plain HTTP gets nothing (%v)", err), true
		return ans
	}
	ans.Answer = "not TLS; plain HTTP gets " + strconv.Quote(string(b[:n]))
	return ans
}

// TestNoDoorForOtherUsers lists every TCP port that rayctl and the processes it started listen on in the
// host's network namespace, and tries each as another local user (nobody) would, with no credentials:
// each must refuse, close, demand a client certificate, or answer 401/403 over TLS. This is the test
// that catches a plain-HTTP etcd raft port (which let any local user forge raft messages and so run
// a root pod with hostPath /).
func TestNoDoorForOtherUsers(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	// A running pod, so that the pod bridge (and the DNS server's address on it) exists.
	nodeStartPod(t, ctx, in, ns, nodePod("door", corev1.RestartPolicyAlways, 0, nodeSh("c", "sleep 3600")))
	local, err := localAddrs()
	must(t, "this host's addresses", err)
	addrs, owner := probeListeners(t, ctx, in)
	checkPodNetworkApart(t, ctx, in, ns, local, addrs, owner)
}

// probeListeners lists every TCP port that rayctl and the processes it started listen on in the host's
// network namespace, none on a wildcard address, and tries each as another local user (nobody) would,
// with no credentials: each must refuse, close, demand a client certificate, or answer 401/403 over TLS.
// It returns the ports and who holds each.
func probeListeners(t *testing.T, ctx context.Context, in *framework.Instance) ([]string, map[string]string) {
	t.Helper()
	local, err := localAddrs()
	must(t, "this host's addresses", err)
	pids := descendants(in.Cmd.Process.Pid)
	listening, err := listeningTCP()
	must(t, "reading /proc/net/tcp", err)
	var addrs []string
	owner := map[string]string{}
	for _, pid := range pids {
		for _, inode := range socketInodes(pid) {
			if addr, ok := listening[inode]; ok {
				if reach := dialable(addr); reach != addr {
					t.Errorf("%s (pid %d, %s) listens on a wildcard address", addr, pid, comm(pid))
					addr = reach
				}
				// Only addresses of this host: an address no interface has yet (one bound with
				// IP_FREEBIND) would route off the machine.
				if host, _, _ := net.SplitHostPort(addr); !local[host] {
					t.Logf("skip %s (pid %d): no interface has that address yet", addr, pid)
					continue
				}
				addrs = append(addrs, addr)
				owner[addr] = fmt.Sprintf("pid %d (%s)", pid, comm(pid))
			}
		}
	}
	if len(addrs) < 4 {
		t.Fatalf("found %d listening TCP ports of rayctl (pid %d and %d descendants): %v; want at least the API server, etcd's client and peer ports and the kubelet's",
			len(addrs), in.Cmd.Process.Pid, len(pids)-1, addrs)
	}

	// The probe runs as nobody: a copy of this test binary where nobody may run it.
	self, err := os.Executable()
	must(t, "finding the test binary", err)
	dir, err := os.MkdirTemp("", "rayctl-probe-")
	must(t, "a directory for the probe", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, "opening the directory", os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "probe")
	b, err := os.ReadFile(self)
	must(t, "reading the test binary", err)
	must(t, "writing the probe", os.WriteFile(bin, b, 0o755))
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{probeEnv + "=" + strings.Join(addrs, ","), "PATH=/usr/bin:/bin"}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivileged, Gid: unprivileged}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe as uid %d: %v\n%s", unprivileged, err, out)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var a probeAnswer
		must(t, "reading the probe's answer", dec.Decode(&a))
		seen++
		ok := a.Closed || a.HTTPStatus == 401 || a.HTTPStatus == 403
		verdict := "ok"
		if !ok {
			verdict = "OPEN"
			t.Errorf("port %s of %s answers another local user: %s", a.Addr, owner[a.Addr], a.Answer)
		}
		t.Logf("%-4s %-21s %-28s %s", verdict, a.Addr, owner[a.Addr], a.Answer)
	}
	if seen != len(addrs) {
		t.Errorf("the probe answered for %d of %d ports:\n%s", seen, len(addrs), out)
	}
	return addrs, owner
}

// checkPodNetworkApart checks that the pod network is not the host's (see TestNoDoorForOtherUsers).
func checkPodNetworkApart(t *testing.T, ctx context.Context, in *framework.Instance, ns string, local map[string]bool, addrs []string, owner map[string]string) {
	t.Helper()

	// The pod network is not the host's: no address of the host is in it, so neither the pod nor the
	// listeners for pods on the bridge's gateway (cluster DNS, the API server's) are among the ports above.
	pod, err := in.Client.CoreV1().Pods(ns).Get(ctx, "door", metav1.GetOptions{})
	must(t, "reading the pod", err)
	podIP := net.ParseIP(pod.Status.PodIP)
	if podIP == nil {
		t.Fatalf("the pod has no IP: %q", pod.Status.PodIP)
	}
	if gw := gatewayOf(pod.Status.PodIP, local); gw != "" {
		t.Errorf("the host has the address %s beside the pod's %s: the pod network reaches into the host's", gw, podIP)
	}
	gw := podIP.Mask(net.CIDRMask(24, 32)).To4()
	gw[3] = 1 // the bridge's address in the instance's /24 (instance.OwnNetwork)
	for _, a := range addrs {
		if host, _, _ := net.SplitHostPort(a); host == gw.String() {
			t.Errorf("%s (%s) listens in the host's network namespace on the pod bridge's gateway", a, owner[a])
		}
	}
	// Even inside the node namespace, the cluster DNS answers pods, not the node (its queries come from the
	// gateway).
	q := new(dns.Msg).SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
	var r *dns.Msg
	must(t, "a DNS query from the node namespace to "+gw.String(), in.InPodNetwork(func() (err error) {
		r, _, err = (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).ExchangeContext(ctx, q, net.JoinHostPort(gw.String(), "53"))
		return err
	}))
	if r.Rcode != dns.RcodeRefused {
		t.Errorf("the cluster DNS answers the node: rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	t.Logf("ok   %-21s UDP DNS query from the node namespace: %s", gw.String()+":53", dns.RcodeToString[r.Rcode])
}

// localAddrs returns the IP addresses of this host's interfaces.
func localAddrs() (map[string]bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			out[ipn.IP.String()] = true
		}
	}
	return out, nil
}

// gatewayOf returns the host address in podIP's /24 (the pod bridge's), or "".
func gatewayOf(podIP string, local map[string]bool) string {
	ip := net.ParseIP(podIP).To4()
	if ip == nil {
		return ""
	}
	for a := range local {
		if l := net.ParseIP(a).To4(); l != nil && l[0] == ip[0] && l[1] == ip[1] && l[2] == ip[2] {
			return a
		}
	}
	return ""
}

// descendants returns pid and every process below it.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after its closing parenthesis.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// socketInodes returns the inodes of the sockets pid holds open.
func socketInodes(pid int) []string {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var inodes []string
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes = append(inodes, strings.TrimSuffix(inode, "]"))
		}
	}
	return inodes
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// hostTCPFiles are the host's TCP socket tables as the calling thread sees them. Not /proc/net (the
// main thread's): a goroutine that entered a node network namespace (framework.Instance.InPodNetwork) and ended
// there leaves the main thread in that namespace for good, as Go does not end the main thread. Read them
// with the OS thread locked: an unlocked thread never entered another namespace.
var hostTCPFiles = []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"}

// listeningTCP maps the socket inode of every listening TCP socket in the host's network namespace to
// its address (0.0.0.0 or :: for a wildcard one).
func listeningTCP() (map[string]string, error) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	out := map[string]string{}
	for _, f := range hostTCPFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr, err := procAddr(fields[1])
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", f, fields[1], err)
			}
			out[fields[9]] = addr
		}
	}
	return out, nil
}

// procAddr turns /proc/net/tcp's "0100007F:1F90" (the address in host byte order per 32-bit word) into
// "127.0.0.1:8080".
func procAddr(s string) (string, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return "", errors.New("no port")
	}
	raw, err := hex.DecodeString(hexIP)
	if err != nil {
		return "", err
	}
	ip := make(net.IP, len(raw))
	for i := 0; i+4 <= len(raw); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)), nil
}

// dialable is a listener's address as a client dials it: an unspecified address as the loopback one,
// which reaches it.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
