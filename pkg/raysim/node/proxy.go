package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// lateServer is an HTTP server a node starts when it is first needed — Serve's proxy, which Ray starts
// only once a Serve config is deployed, so that a node without Serve holds no port 8000 — and stops
// with the node.
type lateServer struct {
	mu     sync.Mutex
	srv    *http.Server
	port   int
	closed bool
	done   chan struct{}
}

// start listens on host:port and serves h; a second start is a no-op returning the first's port.
func (l *lateServer) start(what, host string, port int, h http.Handler, logf func(string, ...any)) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errors.New("the node is stopping")
	}
	if l.srv != nil {
		return l.port, nil
	}
	lis, err := listen(what, host, port)
	if err != nil {
		return 0, err
	}
	l.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	l.port = lis.Addr().(*net.TCPAddr).Port
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf("%s server: %v", what, err)
		}
	}()
	logf("%s listening on port %d", what, l.port)
	return l.port, nil
}

// started is the port it serves on, 0 before start.
func (l *lateServer) started() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.port
}

// close stops the server (if it started) and any later start.
func (l *lateServer) close() {
	l.mu.Lock()
	l.closed = true
	srv, done := l.srv, l.done
	l.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	_ = srv.Close()
	<-done
}

// followHeadProxy starts the worker's Serve proxy once the head's answers /-/healthz (Serve is
// running), passing every request on to the head, where raysim runs every replica. It gives up when
// ctx ends or the port is taken.
func (w *Worker) followHeadProxy(ctx context.Context, headHost string) {
	head := &url.URL{Scheme: "http", Host: net.JoinHostPort(headHost, fmt.Sprint(w.cfg.HeadServePort))}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, head.String()+"/-/healthz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if _, err := w.proxy.start("serve", w.cfg.BindHost, w.cfg.ServePort, httputil.NewSingleHostReverseProxy(head), w.cfg.Logf); err != nil {
					w.cfg.Logf("Serve's HTTP proxy does not run on this node: %v", err)
				}
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
