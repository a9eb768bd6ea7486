package kubeletapi_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/rayctl/rayctl/pkg/kubelet/kubeletapi"
)

// echoServer answers each line it reads with "echo: " and the line, on the host's loopback.
func echoServer(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := io.WriteString(c, "echo: "+sc.Text()+"\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// forward runs client-go's port forwarder (SPDY) against the kubelet's /portForward of ns/p for
// remote, and returns the local port and the channel ForwardPorts' result arrives on.
func (s *server) forward(t *testing.T, remote int) (int, <-chan error) {
	t.Helper()
	cfg := &rest.Config{Host: s.url, TLSClientConfig: rest.TLSClientConfig{CertData: s.clientKP.CertPEM, KeyData: s.clientKP.KeyPEM, CAData: s.caPEM}}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(s.url + "/portForward/ns/p")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{":" + itoa(remote)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() { close(stop) })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward ended before it was ready: %v", err)
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	return int(ports[0].Local), done
}

func itoa(i int) string { return strconv.Itoa(i) }

func roundTrip(t *testing.T, port int, line string) string {
	t.Helper()
	c, err := net.Dial("tcp4", "127.0.0.1:"+itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", line, err)
	}
	return strings.TrimSuffix(got, "\n")
}

func TestPortForwardOverSPDY(t *testing.T) {
	s := start(t)
	gone := make(chan struct{})
	s.pods.setNetwork("ns/p", kubeletapi.PodNetwork{UID: "u1", Gone: gone})
	port := echoServer(t)
	local, done := s.forward(t, port)
	for _, line := range []string{"one", "two"} {
		if got := roundTrip(t, local, line); got != "echo: "+line {
			t.Fatalf("through the forward: %q, want %q", got, "echo: "+line)
		}
	}
	// The pod leaving the node ends the forward: the client sees its connection lost.
	close(gone)
	select {
	case err := <-done:
		if !errors.Is(err, portforward.ErrLostConnectionToPod) {
			t.Fatalf("after the pod went: %v, want %v", err, portforward.ErrLostConnectionToPod)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the forward outlived its pod")
	}
}

func TestPortForwardRefusedPort(t *testing.T) {
	s := start(t)
	s.pods.setNetwork("ns/p", kubeletapi.PodNetwork{UID: "u1", Gone: make(chan struct{})})
	l, _ := net.Listen("tcp4", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	local, done := s.forward(t, port)
	c, err := net.Dial("tcp4", "127.0.0.1:"+itoa(local))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The kubelet reports the refused dial on the error stream, and client-go ends the forward.
	select {
	case err := <-done:
		if !errors.Is(err, portforward.ErrLostConnectionToPod) {
			t.Fatalf("forward to a closed port: %v, want %v", err, portforward.ErrLostConnectionToPod)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a forward to a closed port hung")
	}
}

func TestPortForwardUnknownPod(t *testing.T) {
	s := start(t)
	code, body := s.get(t, "/portForward/ns/nope")
	if code != http.StatusNotFound || !strings.Contains(body, "not found") {
		t.Fatalf("unknown pod: %d %q", code, body)
	}
}
