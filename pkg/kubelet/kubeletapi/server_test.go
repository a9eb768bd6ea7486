package kubeletapi_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/kubelet/kubeletapi"
	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
)

type pods struct {
	mu   sync.Mutex
	refs map[string]kubeletapi.ContainerRef
	nets map[string]kubeletapi.PodNetwork
}

func (p *pods) Network(ns, pod string) (kubeletapi.PodNetwork, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.nets[ns+"/"+pod]
	if !ok {
		return n, fmt.Errorf("%s/%s: %w", ns, pod, kubeletapi.ErrNotFound)
	}
	return n, nil
}

func (p *pods) setNetwork(key string, n kubeletapi.PodNetwork) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nets[key] = n
}

func (p *pods) Container(ns, pod, c string) (kubeletapi.ContainerRef, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ref, ok := p.refs[ns+"/"+pod+"/"+c]
	if !ok {
		return ref, fmt.Errorf("%s/%s: %w", ns, pod, kubeletapi.ErrNotFound)
	}
	return ref, nil
}

func (p *pods) set(key string, ref kubeletapi.ContainerRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refs[key] = ref
}

type server struct {
	url      string
	client   *http.Client
	clientKP *pki.KeyPair
	caPEM    []byte
	pods     *pods
	rt       *fake.Runtime
	dir      string
}

func start(t *testing.T) *server {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreate(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving("kubelet", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	clientKP, err := ca.Client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	rt := fake.New(fake.Options{})
	ps := &pods{refs: map[string]kubeletapi.ContainerRef{}, nets: map[string]kubeletapi.PodNetwork{}}
	srv := kubeletapi.New(kubeletapi.Config{ServingCert: cert, ClientCAs: ca.Pool(), Pods: ps, Runtime: rt, FollowPoll: 20 * time.Millisecond})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	clientCert, err := tls.X509KeyPair(clientKP.CertPEM, clientKP.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}}}}
	return &server{url: "https://" + l.Addr().String(), client: hc, clientKP: clientKP, caPEM: ca.CertPEM(), pods: ps, rt: rt, dir: dir}
}

func writeCRI(t *testing.T, path string, at time.Time, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		fmt.Fprintf(f, "%s stdout F %s\n", at.UTC().Format(time.RFC3339Nano), l)
	}
}

func (s *server) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := s.client.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestContainerLogs(t *testing.T) {
	s := start(t)
	cur, prev := filepath.Join(s.dir, "1.log"), filepath.Join(s.dir, "0.log")
	old := time.Now().Add(-time.Hour)
	writeCRI(t, prev, old, "previous run")
	writeCRI(t, cur, old, "one", "two")
	f, _ := os.OpenFile(cur, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "%s stderr P par\n%s stderr F tial\n", time.Now().UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano))
	f.Close()
	s.pods.set("ns/p/c", kubeletapi.ContainerRef{ID: "x", LogPath: cur, PreviousLogPath: prev})

	for _, tc := range []struct{ query, want string }{
		{"", "one\ntwo\npartial\n"},
		{"?tailLines=1", "tial\n"},
		{"?tailLines=3", "two\npartial\n"},
		{"?sinceSeconds=60", "partial\n"},
		{"?limitBytes=5", "one\nt"},
		{"?previous=true", "previous run\n"},
	} {
		code, body := s.get(t, "/containerLogs/ns/p/c"+tc.query)
		if code != 200 || body != tc.want {
			t.Errorf("%s: %d %q, want %q", tc.query, code, body, tc.want)
		}
	}
	if _, body := s.get(t, "/containerLogs/ns/p/c?timestamps=true&tailLines=4"); !strings.HasPrefix(body, old.UTC().Format(time.RFC3339Nano)+" one\n") {
		t.Errorf("timestamps: %q", body)
	}
	if code, _ := s.get(t, "/containerLogs/ns/nope/c"); code != 404 {
		t.Errorf("unknown pod: %d, want 404", code)
	}
	s.pods.set("ns/fresh/c", kubeletapi.ContainerRef{ID: "y", LogPath: cur})
	if code, body := s.get(t, "/containerLogs/ns/fresh/c?previous=true"); code != 400 || !strings.Contains(body, "previous terminated container") {
		t.Errorf("previous without one: %d %q", code, body)
	}
}

func TestFollowStreamsUntilTheContainerStops(t *testing.T) {
	s := start(t)
	path := filepath.Join(s.dir, "0.log")
	writeCRI(t, path, time.Now(), "first")
	s.pods.set("ns/p/c", kubeletapi.ContainerRef{ID: "x", LogPath: path, Running: true})
	resp, err := s.client.Get(s.url + "/containerLogs/ns/p/c?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(resp.Body, buf, len("first\n"))
	if err != nil || string(buf[:n]) != "first\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	writeCRI(t, path, time.Now(), "second")
	n, err = io.ReadAtLeast(resp.Body, buf, len("second\n"))
	if err != nil || string(buf[:n]) != "second\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	writeCRI(t, path, time.Now(), "last words")
	s.pods.set("ns/p/c", kubeletapi.ContainerRef{ID: "x", LogPath: path, Running: false})
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "last words\n" {
		t.Fatalf("after stop: %q, %v", rest, err)
	}
}

func TestClientsNeedACertificateFromTheCA(t *testing.T) {
	s := start(t)
	s.pods.set("ns/p/c", kubeletapi.ContainerRef{ID: "x", LogPath: filepath.Join(s.dir, "none.log")})
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := noCert.Get(s.url + "/containerLogs/ns/p/c"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %d", resp.StatusCode)
	}
	other, err := pki.LoadOrCreate(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := other.Client("intruder", "system:masters", nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	foreign := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
	if resp, err := foreign.Get(s.url + "/containerLogs/ns/p/c"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client with another CA's certificate got %d", resp.StatusCode)
	}
	if code, _ := s.get(t, "/healthz"); code != 200 {
		t.Errorf("healthz with a good certificate: %d", code)
	}
}

func TestExecOverSPDY(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	sb, _ := s.rt.RunSandbox(ctx, runtime.SandboxConfig{PodUID: "u1", Name: "p", Namespace: "ns"})
	id, _ := s.rt.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "c", Image: "busybox"})
	_ = s.rt.StartContainer(ctx, id)
	s.rt.SetExec(func(c *fake.Container, cmd []string, stdio runtime.ExecIO) (int, error) {
		in := ""
		if stdio.Stdin != nil {
			b, _ := io.ReadAll(stdio.Stdin)
			in = string(b)
		}
		fmt.Fprintf(stdio.Stdout, "ran %s in %s with %q", strings.Join(cmd, " "), c.Config.Name, in)
		if stdio.Stderr != nil {
			fmt.Fprint(stdio.Stderr, "to stderr")
		}
		if cmd[0] == "fail" {
			return 3, nil
		}
		return 0, nil
	})
	s.pods.set("ns/p/c", kubeletapi.ContainerRef{ID: id, Running: true})
	cfg := &rest.Config{Host: s.url, TLSClientConfig: rest.TLSClientConfig{CertData: s.clientKP.CertPEM, KeyData: s.clientKP.KeyPEM, CAData: s.caPEM}}

	run := func(cmd ...string) (string, string, error) {
		q := url.Values{"stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}, "command": cmd}
		u, _ := url.Parse(s.url + "/exec/ns/p/c?" + q.Encode())
		exec, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("input"), Stdout: &stdout, Stderr: &stderr})
		return stdout.String(), stderr.String(), err
	}
	out, errOut, err := run("echo", "hi")
	if err != nil || out != `ran echo hi in c with "input"` || errOut != "to stderr" {
		t.Fatalf("exec: out %q err %q: %v", out, errOut, err)
	}
	_, _, err = run("fail")
	if err == nil || !strings.Contains(err.Error(), "exit code 3") {
		t.Fatalf("failing exec: %v, want exit code 3", err)
	}
}
