// Package etcd runs rayctl's embedded, single-member etcd: data in the data dir, the client endpoint on
// loopback behind client-certificate TLS (so other local users cannot read it), short raft ticks so the
// member elects itself at once, and etcd's own logs sent to rayctl's log.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config says where etcd keeps its data and which certificates guard its client port.
type Config struct {
	// Dir is the data directory (created 0700).
	Dir string
	// CAFile, CertFile and KeyFile are the serving certificate and the CA that client certificates must chain to.
	CAFile, CertFile, KeyFile string
	// Logger receives etcd's logs; nil discards them.
	Logger *zap.Logger
	// MaxRequestBytes bounds one request; KubeRay's CRDs need more than etcd's 1.5 MiB default.
	MaxRequestBytes uint
	// QuotaBackendBytes bounds the database size; 0 keeps etcd's default (2 GiB).
	QuotaBackendBytes int64
}

// Server is a running embedded etcd.
type Server struct {
	etcd      *embed.Etcd
	closeOnce sync.Once
	// Endpoint is the client URL, e.g. https://127.0.0.1:40123.
	Endpoint string
}

// Start starts etcd and returns once it serves clients, or with an error when it cannot.
func Start(ctx context.Context, c Config) (*Server, error) {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(c.Dir, 0o700); err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "rayctl"
	cfg.Dir = c.Dir
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.MaxRequestBytes = c.MaxRequestBytes
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 8 << 20
	}
	cfg.QuotaBackendBytes = c.QuotaBackendBytes
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "5m"
	cfg.SnapshotCount = 10000
	cfg.Metrics = "basic"
	clientURL := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	cfg.ClientTLSInfo = transport.TLSInfo{
		CertFile:       c.CertFile,
		KeyFile:        c.KeyFile,
		TrustedCAFile:  c.CAFile,
		ClientCertAuth: true,
	}
	logger := c.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting etcd in %s: %w", c.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd failed: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("etcd did not become ready within 60s")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	return &Server{etcd: e, Endpoint: "https://" + e.Clients[0].Addr().String()}, nil
}

// Err reports a fatal error of the running server.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops etcd, flushing what it holds. Calling it again does nothing.
func (s *Server) Close() { s.closeOnce.Do(s.etcd.Close) }
