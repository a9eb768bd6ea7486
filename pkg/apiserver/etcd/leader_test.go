package etcd

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestHasLeaderTellsTheTruth makes the single member lose its quorum (a second voting member that never
// starts): the member steps down, and HasLeader says so at once, while before it answered nil.
func TestHasLeaderTellsTheTruth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "etcd")
	cfg := testConfig(t, dir)
	cfg.looseReconfig = true
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.HasLeader(); err != nil {
		t.Fatalf("a started member: %v", err)
	}

	c := apiServerClient(t, s, dir)
	defer c.Close()
	// 127.0.0.1:1 answers nobody: the new member never joins, and two voters need both for a quorum.
	if _, err := c.MemberAdd(ctx, []string{"https://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	for s.HasLeader() == nil {
		select {
		case <-ctx.Done():
			t.Fatal("the member kept its leadership without a quorum")
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Logf("HasLeader: %v", s.HasLeader())
}

// apiServerClient is a client of s with the API server's certificate (as testConfig issued it for dir).
func apiServerClient(t *testing.T, s *Server, dir string) *clientv3.Client {
	t.Helper()
	pkiDir := filepath.Join(filepath.Dir(dir), "pki")
	cr, err := IssueCredentials(filepath.Join(pkiDir, "etcd"), pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	kp := cr.APIServerClient
	tlsCfg, err := transport.TLSInfo{CertFile: kp.CertFile, KeyFile: kp.KeyFile, TrustedCAFile: cr.CA.CertFile()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, TLS: tlsCfg, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
