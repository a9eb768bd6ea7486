package etcd

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestQuotaExceededThenRecovers fills a small quota through a client: the refused write says etcd is
// out of space and names the quota; once the keys are deleted, writes succeed again.
func TestQuotaExceededThenRecovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "etcd")
	cfg := testConfig(t, dir)
	cfg.QuotaBackendBytes = 8 << 20
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	c := apiServerClient(t, s, dir)
	defer c.Close()

	val := strings.Repeat("x", 256<<10)
	var n int
	for ; ; n++ {
		if n > 100 {
			t.Fatal("100 values of 256 KiB fit in an 8 MiB quota")
		}
		_, err := c.Put(ctx, fmt.Sprintf("/k/%03d", n), val)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "rayctl's etcd is out of space") || !strings.Contains(err.Error(), "quota of 8.0 MiB") {
			t.Fatalf("put %d: %v; want the out-of-space message", n, err)
		}
		break
	}
	if _, err := c.Delete(ctx, "/k/", clientv3.WithPrefix()); err != nil {
		t.Fatalf("deleting while out of space: %v", err)
	}
	deleted := time.Now()
	for {
		_, err := c.Put(ctx, "/after", val)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("writes still refused after the deletion: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d values stored before the quota; writes accepted again %s after the deletion", n, time.Since(deleted).Round(time.Millisecond))
}
