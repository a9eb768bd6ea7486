package auth

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileToken reads a token file the kubelet rewrites while the process runs: a rewrite is seen at the
// next call, a rewrite the file's mtime and size do not show is seen once FileTokenRecheck has passed,
// and while the file is missing or empty the token last read is kept.
func TestFileToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write("first\n", t0)
	f := NewFileToken(path, "")
	now := time.Now()
	f.now = func() time.Time { return now }
	want := func(tok string) {
		t.Helper()
		if got := f.Token(); got != tok {
			t.Fatalf("token %q, want %q", got, tok)
		}
	}
	want("first")
	write("second-token", t0.Add(48*time.Minute))
	want("second-token")
	write("third-token!", t0.Add(48*time.Minute)) // same size and mtime
	want("second-token")
	now = now.Add(FileTokenRecheck)
	want("third-token!")
	write("", t0.Add(96*time.Minute))
	want("third-token!")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	want("third-token!")
	write("fourth", t0.Add(144*time.Minute))
	want("fourth")
}
