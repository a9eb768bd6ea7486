package etcd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// pristine is an etcd data directory that held some keys, made once for the package's tests.
var pristine string

func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	pkiDir := filepath.Join(filepath.Dir(dir), "pki")
	cr, err := IssueCredentials(filepath.Join(pkiDir, "etcd"), pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	return cr.ServerConfig(Config{Dir: dir})
}

// withData returns a copy of a data directory etcd wrote 500 keys of about 1 KiB into.
func withData(t *testing.T) string {
	t.Helper()
	if pristine == "" {
		root, err := os.MkdirTemp("", "rayctl-etcd-check-")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "etcd")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := Start(ctx, testConfig(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		val := make([]byte, 1000)
		for i := range 500 {
			if _, err := s.etcd.Server.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "/registry/k%03d", i), Value: val}); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		pristine = dir
	}
	dst := filepath.Join(t.TempDir(), "etcd")
	if err := copyTree(pristine, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, in)
		return err
	})
}

// firstWAL is the oldest write-ahead log file of the etcd data directory dir.
func firstWAL(t *testing.T, dir string) string {
	t.Helper()
	wals, _ := filepath.Glob(filepath.Join(walDir(dir), "*.wal"))
	if len(wals) == 0 {
		t.Fatal("no write-ahead log file")
	}
	return wals[0]
}

// overwrite writes n random bytes at off into path.
func overwrite(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFindsDamage(t *testing.T) {
	size := func(t *testing.T, p string) int64 {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	cases := []struct {
		name        string
		damage      func(t *testing.T, dir string)
		requireData bool
		want        string // in the error; "" for none
	}{
		{"intact", func(*testing.T, string) {}, true, ""},
		{"new directory", func(t *testing.T, dir string) { os.RemoveAll(dir) }, false, ""},
		{"missing directory of an initialised data dir", func(t *testing.T, dir string) { os.RemoveAll(dir) }, true, "member: missing"},
		{"database is garbage", func(t *testing.T, dir string) { overwrite(t, DBPath(dir), 0, size(t, DBPath(dir))) }, false, "not a database etcd can open"},
		{"pages after the meta pages are garbage", func(t *testing.T, dir string) { overwrite(t, DBPath(dir), 8192, size(t, DBPath(dir))-8192) }, false, "db: "},
		{"database truncated", func(t *testing.T, dir string) { os.Truncate(DBPath(dir), 64<<10) }, false, "truncated"},
		{"database truncated to one page", func(t *testing.T, dir string) { os.Truncate(DBPath(dir), 4096) }, false, "file size too small"},
		{"database empty", func(t *testing.T, dir string) { os.Truncate(DBPath(dir), 0) }, false, "empty (0 bytes)"},
		{"database missing", func(t *testing.T, dir string) { os.Remove(DBPath(dir)) }, false, "missing, while etcd's write-ahead log is there"},
		{"write-ahead log missing", func(t *testing.T, dir string) { os.RemoveAll(walDir(dir)) }, false, "no write-ahead log files"},
		{"write-ahead log garbage from the start", func(t *testing.T, dir string) { overwrite(t, firstWAL(t, dir), 0, 3000) }, false, "unreadable from its first record"},
		{"write-ahead log garbage later", func(t *testing.T, dir string) { overwrite(t, firstWAL(t, dir), 2000, 3000) }, false, "crc mismatch"},
		{"write-ahead log torn at its end", func(t *testing.T, dir string) {
			f := firstWAL(t, dir)
			os.Truncate(f, size(t, f)-3)
		}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := withData(t)
			c.damage(t, dir)
			start := time.Now()
			err := Check(dir, c.requireData)
			t.Logf("Check took %s: %v", time.Since(start), err)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var d *DamagedError
			if !errors.As(err, &d) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check = %v, want a DamagedError containing %q", err, c.want)
			}
		})
	}
}

// TestStartRefusesDamage: Start reports damage as a DamagedError, whether Check finds it or etcd panics
// on it, and starts on intact data with the keys still there.
func TestStartRefusesDamage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dir := withData(t)
	s, err := Start(ctx, testConfig(t, dir))
	if err != nil {
		t.Fatalf("intact data: %v", err)
	}
	resp, err := s.etcd.Server.Range(ctx, &pb.RangeRequest{Key: []byte("/registry/"), RangeEnd: []byte("/registry0"), CountOnly: true})
	s.Close()
	if err != nil || resp.Count != 500 {
		t.Fatalf("after a restart: %v keys, %v; want 500", resp, err)
	}

	dir = withData(t)
	overwrite(t, DBPath(dir), 0, 1<<20)
	_, err = Start(ctx, testConfig(t, dir))
	var d *DamagedError
	if !errors.As(err, &d) || d.Path != DBPath(dir) {
		t.Fatalf("garbage database: %v, want a DamagedError for %s", err, DBPath(dir))
	}

	// Garbage at the log's start makes etcd panic; garbage after its first records fails a checksum.
	for _, off := range []int64{0, 2000} {
		dir = withData(t)
		wals, _ := filepath.Glob(filepath.Join(walDir(dir), "*.wal"))
		overwrite(t, wals[0], off, 3000)
		_, err = Start(ctx, testConfig(t, dir))
		if !errors.As(err, &d) {
			t.Fatalf("garbage at %d in the write-ahead log: %v, want a DamagedError", off, err)
		}
		t.Logf("garbage at %d in the write-ahead log: %v", off, err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pristine != "" {
		os.RemoveAll(filepath.Dir(pristine))
	}
	os.Exit(code)
}
