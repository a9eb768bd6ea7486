package kubeletapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// dialTimeout bounds connecting to a port of a pod.
const dialTimeout = 10 * time.Second

// replyGrace is how long a failed dial waits before its error resets the streams (see PortForward).
const replyGrace = 100 * time.Millisecond

// PodNetwork is where the ports of a pod on this node are reached.
type PodNetwork struct {
	// UID is the pod's UID.
	UID string
	// NetNSPath is the pod's network namespace; empty when the pod shares the host's network
	// (hostNetwork pods, or a runtime that gives pods no namespace of their own).
	NetNSPath string
	// Gone is closed when the pod has left this node; its forwards end then.
	Gone <-chan struct{}
}

// portForward serves /portForward/{namespace}/{pod}: the port-forward protocol (portforward.k8s.io)
// over SPDY, or its WebSocket form, each stream connected to 127.0.0.1:port inside the pod's network
// namespace, so that ports a pod binds to its loopback are reached too.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	pn, err := s.cfg.Pods.Network(ns, name)
	if err != nil {
		writeError(w, err)
		return
	}
	var opts *portforward.V4Options
	if wsstream.IsWebSocketRequest(r) {
		if opts, err = portforward.NewV4Options(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	conn := &hijackTracker{ResponseWriter: w}
	served := make(chan struct{})
	defer close(served)
	go func() {
		select {
		case <-pn.Gone:
			conn.close()
		case <-served:
		}
	}()
	portforward.ServePortForward(conn, r, podForwarder{netns: pn.NetNSPath}, name+"_"+ns, pn.UID, opts,
		streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

// podForwarder connects port-forward streams to ports in one pod's network namespace.
type podForwarder struct{ netns string }

// PortForward copies between stream and 127.0.0.1:port in the pod's network namespace until the pod's
// side of the connection ends.
func (f podForwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("invalid port %d", port)
	}
	var conn net.Conn
	err := network.Do(f.netns, func() error {
		var err error
		d := net.Dialer{Timeout: dialTimeout}
		conn, err = d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		return err
	})
	if err != nil {
		// The streaming library answers an error by writing it on the pair's error stream and resetting
		// both streams, and it hands a stream to this function before it has sent the stream's reply: a
		// dial refused at once (a closed port on loopback) can reset the data stream before the client
		// saw it accepted, and client-go then drops the connection without reading the error, so
		// kubectl port-forward neither reports it nor ends. Waiting a moment lets the reply go first.
		select {
		case <-time.After(replyGrace):
		case <-ctx.Done():
		}
		return err
	}
	defer conn.Close()
	go func() {
		_, err := io.Copy(conn, stream)
		if tcp, ok := conn.(*net.TCPConn); ok && err == nil {
			_ = tcp.CloseWrite() // the client is done sending; the pod may still answer
			return
		}
		_ = conn.Close()
	}()
	// A connection the pod's program resets (a server closing with the client's last bytes unread, as
	// WebSocket servers do after their close frame) ends as a closed one does: an error here would reach
	// kubectl, which then stops forwarding every port.
	if _, err := io.Copy(stream, conn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.ECONNRESET) {
		return err
	}
	return nil
}

// hijackTracker remembers the connection the stream upgrade hijacks, so that it can be closed from
// outside when the pod goes.
type hijackTracker struct {
	http.ResponseWriter

	mu     sync.Mutex
	conn   net.Conn
	closed bool
}

// Hijack takes over the connection, or refuses when the pod went before the upgrade.
func (h *hijackTracker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, errors.New("the pod is gone")
	}
	conn, rw, err := hj.Hijack()
	h.conn = conn
	return conn, rw, err
}

// close ends the hijacked connection, now or as soon as there is one.
func (h *hijackTracker) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.conn != nil {
		_ = h.conn.Close()
	}
}
