// Package kubeletapi is the kubelet's HTTPS API, the endpoints the API server's pods/log, pods/exec and
// pods/portforward subresources proxy to:
//
//	GET /containerLogs/{namespace}/{pod}/{container}?follow&previous&tailLines&sinceSeconds&sinceTime&timestamps&limitBytes
//	GET|POST /exec/{namespace}/{pod}/{container}?command=…&command=…&stdin&stdout&stderr&tty
//	GET|POST /portForward/{namespace}/{pod}
//	GET /healthz
//
// Only clients presenting a certificate chained to the configured CA are served (optionally only some
// common names). Logs are read from the containers' CRI-format log files; exec speaks the Kubernetes
// remote command protocol (v4.channel.k8s.io and older) over SPDY; port forwarding speaks
// portforward.k8s.io over SPDY (or WebSocket) and dials each port inside the pod's network namespace.
package kubeletapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// ErrNotFound says a pod or container is not on this node (wrap it to get a 404).
var ErrNotFound = errors.New("not found")

// ErrNotReady says a pod is on this node but cannot serve the request yet (wrap it to get a 400).
var ErrNotReady = errors.New("not ready")

// ContainerRef locates a container and its logs.
type ContainerRef struct {
	// ID is the runtime's id of the current attempt; Running says whether it runs.
	ID      string
	Running bool
	// LogPath is the current attempt's log file; PreviousLogPath the one before's (empty if none).
	LogPath, PreviousLogPath string
}

// Pods finds containers of the pods on this node.
type Pods interface {
	// Container returns the container of pod namespace/name called container.
	Container(namespace, pod, container string) (ContainerRef, error)
	// Network returns where the ports of pod namespace/name are reached.
	Network(namespace, pod string) (PodNetwork, error)
}

// Config configures the server.
type Config struct {
	// ServingCert is the server's certificate.
	ServingCert tls.Certificate
	// ClientCAs verifies client certificates; a client without one chained to them is refused.
	ClientCAs *x509.CertPool
	// AllowedUsers, when not empty, lists the client certificate common names allowed in.
	AllowedUsers []string
	// Pods finds containers; Runtime runs exec.
	Pods    Pods
	Runtime runtime.Runtime
	// FollowPoll is how often a followed log is checked for new lines (default 100ms).
	FollowPoll time.Duration
}

// Server is the kubelet API server.
type Server struct {
	cfg  Config
	http *http.Server
}

// New returns a server; Serve runs it.
func New(cfg Config) *Server {
	if cfg.FollowPoll <= 0 {
		cfg.FollowPoll = 100 * time.Millisecond
	}
	s := &Server{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	mux.HandleFunc("GET /exec/{namespace}/{pod}/{container}", s.exec)
	mux.HandleFunc("POST /exec/{namespace}/{pod}/{container}", s.exec)
	mux.HandleFunc("GET /portForward/{namespace}/{pod}", s.portForward)
	mux.HandleFunc("POST /portForward/{namespace}/{pod}", s.portForward)
	s.http = &http.Server{
		Handler: s.authorize(mux),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cfg.ServingCert},
			ClientCAs:    cfg.ClientCAs,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		},
		ReadHeaderTimeout: 30 * time.Second,
	}
	return s
}

// Serve accepts TLS connections on l until Close.
func (s *Server) Serve(l net.Listener) error {
	err := s.http.ServeTLS(l, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the server and ends open streams.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		return s.http.Close()
	}
	return nil
}

// authorize refuses requests whose verified client certificate is not among AllowedUsers.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
		if len(s.cfg.AllowedUsers) > 0 && !slices.Contains(s.cfg.AllowedUsers, cn) {
			http.Error(w, "Forbidden (user="+cn+")", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
