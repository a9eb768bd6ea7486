// Package etcd runs rayctl's embedded, single-member etcd: data in the data dir, the client and raft peer
// endpoints on loopback behind client-certificate TLS with etcd's own CA (so other local users can
// neither read it nor speak raft to it, and no API client certificate opens it), short raft ticks so the
// member elects itself at once, and etcd's own logs sent to rayctl's log. Damaged data (check.go) is
// refused with a DamagedError before etcd can crash, hang or start empty on it.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
)

// Config says where etcd keeps its data and which certificates guard its ports.
type Config struct {
	// Dir is the data directory (created 0700).
	Dir string
	// CAFile is the CA that client and peer certificates must chain to: etcd's own, signing nothing but
	// etcd's certificates and the API server's etcd client certificate.
	CAFile string
	// CertFile and KeyFile are the client port's serving certificate.
	CertFile, KeyFile string
	// PeerCertFile and PeerKeyFile are the raft peer port's certificate, for serving and as a client.
	// A single member never dials a peer, but etcd always listens for them: with this certificate and
	// client-certificate authentication nobody without one can reach raft.
	PeerCertFile, PeerKeyFile string
	// Logger receives etcd's logs; nil discards them.
	Logger *zap.Logger
	// MaxRequestBytes bounds one request; KubeRay's CRDs need more than etcd's 1.5 MiB default.
	MaxRequestBytes uint
	// QuotaBackendBytes bounds the database size; 0 keeps etcd's default (2 GiB). Over it, writes fail
	// with NoSpaceMessage until objects are deleted (see space.go).
	QuotaBackendBytes int64
	// RequireData says Dir held data before (the caller knows the data dir was initialised): a missing
	// member directory or database is then a DamagedError, not a new, empty store.
	RequireData bool
	// Fatal, when set, is called instead of etcd's own panic or exit when etcd meets an error it cannot
	// go on from (its logger's Panic and Fatal levels), from whichever goroutine meets it, with what etcd
	// said. It must not return (print and exit, say).
	Fatal func(msg string)

	// looseReconfig turns etcd's strict reconfiguration check off (tests that make the member lose its
	// quorum by adding a member that never starts).
	looseReconfig bool
}

// Server is a running embedded etcd.
type Server struct {
	etcd      *embed.Etcd
	closeOnce sync.Once
	stopGuard context.CancelFunc
	guardDone chan struct{}
	// Endpoint is the client URL, e.g. https://127.0.0.1:40123.
	Endpoint string
	// dir, quota and logger are Launch's, for WaitServing.
	dir    string
	quota  int64
	logger *zap.Logger
}

// readyTimeout bounds how long a single member may take to serve: with rayctl's raft ticks it needs well
// under a second, so a much longer wait means it cannot.
const readyTimeout = 30 * time.Second

// Start starts etcd and returns once it serves clients, or with an error when it cannot. Data etcd
// would crash on, hang on or silently replace with an empty store (see Check) gives a *DamagedError.
func Start(ctx context.Context, c Config) (*Server, error) {
	s, err := Launch(c)
	if err != nil {
		return nil, err
	}
	if err := s.WaitServing(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Launch starts etcd and returns once its client listener is bound (Endpoint is known), before it
// serves: the member's election and its first raft round happen meanwhile, while the caller prepares
// its clients (a client's requests wait for the leader). WaitServing says whether it came to serve;
// until it has said so, Close must not be called. Launch's errors are Start's.
func Launch(c Config) (s *Server, err error) {
	if err := Check(c.Dir, c.RequireData); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(c.Dir, 0o700); err != nil {
		return nil, err
	}
	// etcd panics, on this goroutine, on some damage Check does not look for (a garbled write-ahead log).
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, &DamagedError{Path: c.Dir, Problem: fmt.Sprintf("etcd failed opening its data (%v)", r)}
		}
	}()
	cfg := embed.NewConfig()
	cfg.Name = "rayctl"
	cfg.Dir = c.Dir
	// A single member elects itself once its election timeout has passed, which etcd draws between one
	// and two timeouts, less the ticks it fast-forwards at start (all but one): every start waited 1 to
	// ElectionMs/TickMs ticks for the leader. 50 ms, the least etcd allows for 10 ms ticks (5 ticks), is
	// 10–50 ms (30 on average) where 100 ms was 10–100 ms (55). With one member no other one can time
	// out on a leader it does not hear; a shorter tick would wake an idle etcd more often.
	cfg.TickMs = 10
	cfg.ElectionMs = 50
	cfg.MaxRequestBytes = c.MaxRequestBytes
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 8 << 20
	}
	cfg.QuotaBackendBytes = c.QuotaBackendBytes
	quota := c.QuotaBackendBytes
	if quota <= 0 {
		quota = DefaultQuotaBytes
	}
	cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{noSpaceMessage(NoSpaceMessage(quota))}
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "5m"
	cfg.SnapshotCount = 10000
	cfg.Metrics = "basic"
	cfg.StrictReconfigCheck = !c.looseReconfig
	clientURL := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
	peerURL := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
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
	if c.PeerCertFile == "" || c.PeerKeyFile == "" || c.CAFile == "" {
		return nil, errors.New("etcd needs a CA and a peer certificate: its raft port is never left open")
	}
	cfg.PeerTLSInfo = transport.TLSInfo{
		CertFile:       c.PeerCertFile,
		KeyFile:        c.PeerKeyFile,
		TrustedCAFile:  c.CAFile,
		ClientCertAuth: true,
	}
	logger := c.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	if c.Fatal != nil {
		hook := fatalHook(c.Fatal)
		logger = logger.WithOptions(zap.WithPanicHook(hook), zap.WithFatalHook(hook))
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)

	e, err := embed.StartEtcd(cfg)
	if dataError(err) {
		return nil, &DamagedError{Path: c.Dir, Problem: "etcd cannot read it: " + err.Error()}
	}
	if err != nil {
		return nil, fmt.Errorf("starting etcd in %s: %w", c.Dir, err)
	}
	return &Server{etcd: e, Endpoint: "https://" + e.Clients[0].Addr().String(), dir: c.Dir, quota: quota, logger: logger}, nil
}

// WaitServing returns once the etcd Launch started serves clients, or with an error when it cannot
// (etcd then stopped again; data it hangs on gives a *DamagedError). Call it once.
func (s *Server) WaitServing(ctx context.Context) error {
	e := s.etcd
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closeWithin(e, closeTimeout)
		return fmt.Errorf("etcd failed: %w", err)
	case <-time.After(readyTimeout):
		closeWithin(e, closeTimeout)
		return &DamagedError{Path: s.dir, Problem: fmt.Sprintf("etcd did not become ready on it within %s: the data may be damaged (etcd's log says more)", readyTimeout)}
	case <-ctx.Done():
		closeWithin(e, closeTimeout)
		return ctx.Err()
	}
	gctx, stopGuard := context.WithCancel(context.Background())
	s.stopGuard, s.guardDone = stopGuard, make(chan struct{})
	go func() {
		defer close(s.guardDone)
		guardSpace(gctx, e, s.quota, time.Second, s.logger)
	}()
	return nil
}

// dataError tells the errors etcd's write-ahead log and snapshot readers return on damaged files.
func dataError(err error) bool {
	for _, e := range []error{wal.ErrCRCMismatch, wal.ErrFileNotFound, wal.ErrSnapshotMismatch, wal.ErrSnapshotNotFound,
		wal.ErrSliceOutOfRange, wal.ErrDecoderNotFound, wal.ErrMetadataConflict, snap.ErrCRCMismatch, snap.ErrEmptySnapshot,
		io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// closeTimeout bounds the wait for an etcd that never got ready to stop: one stuck on its data may not.
const closeTimeout = 5 * time.Second

// closeWithin closes e, waiting at most d for it.
func closeWithin(e *embed.Etcd, d time.Duration) {
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// HasLeader returns nil when etcd's raft has a leader, else an error saying it has none: without one,
// etcd serves no write and no consistent read, whatever the last successful check said. It answers at
// once from the member's own raft state, for readiness checks.
func (s *Server) HasLeader() error {
	if s.etcd.Server.Leader() == types.ID(raft.None) {
		return fmt.Errorf("etcd has no raft leader (term %d): it can serve no write and no consistent read", s.etcd.Server.Term())
	}
	return nil
}

// Err reports a fatal error of the running server.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops etcd, flushing what it holds. Calling it again does nothing.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.stopGuard()
		<-s.guardDone
		s.etcd.Close()
	})
}

// fatalHook hands a Panic or Fatal entry of etcd's logger, with its error field, to fatal.
type fatalHook func(msg string)

// OnWrite implements zapcore.CheckWriteHook.
func (f fatalHook) OnWrite(ce *zapcore.CheckedEntry, fields []zapcore.Field) {
	msg := ce.Message
	for _, fl := range fields {
		if fl.Key == "error" || fl.Key == "path" {
			enc := zapcore.NewMapObjectEncoder()
			fl.AddTo(enc)
			msg += fmt.Sprintf(", %s: %v", fl.Key, enc.Fields[fl.Key])
		}
	}
	f(msg)
}
