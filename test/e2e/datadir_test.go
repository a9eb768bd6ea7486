package e2e

// A damaged data dir: `rayctl up` refuses it, quickly and with a message that says what to do, and
// neither starts on it nor starts with an empty store in its place.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestDamagedDataDirIsRefused initialises a data dir (a ConfigMap stored in it), then, on copies of it,
// damages etcd's database (garbage, truncated, emptied), its write-ahead log (garbage from its start,
// a record's checksum), its whole directory
// (removed) and the CA (key garbage, key removed). `rayctl up` on each exits non-zero within a bound,
// naming the damaged path and `rayctl down --delete-data`, and leaves the damage as it found it (no
// new, empty store; no new CA). An undamaged copy starts and still has the ConfigMap. Figure: how long
// each refusal took.
func TestDamagedDataDirIsRefused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts rayctl up")
	}
	ctx := nodeContext(t, 5*time.Minute)
	args := append(framework.ControlPlaneOnly(), "--runtime", "fake")
	in, err := framework.Start("", args...)
	must(t, "starting rayctl", err)
	t.Cleanup(func() { in.Cleanup(t) })
	ns := newNamespace(t, ctx, in)
	_, err = in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	must(t, "creating a ConfigMap", err)
	must(t, "stopping rayctl", in.Stop())

	db := filepath.Join("etcd", "member", "snap", "db")
	garble := func(rel string, off, n int64) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, rel), os.O_WRONLY, 0)
			must(t, "opening "+rel, err)
			defer f.Close()
			if n < 0 {
				st, _ := f.Stat()
				n = st.Size() - off
			}
			b := make([]byte, n)
			_, _ = rand.Read(b)
			_, err = f.WriteAt(b, off)
			must(t, "garbling "+rel, err)
		}
	}
	wal := func(dir string) string {
		wals, _ := filepath.Glob(filepath.Join(dir, "etcd", "member", "wal", "*.wal"))
		if len(wals) == 0 {
			return ""
		}
		rel, _ := filepath.Rel(dir, wals[0])
		return rel
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		// path is what the message must name and, unless kept says otherwise, what must be left as the
		// damage left it.
		path, kept string
	}{
		{"etcd database garbage", garble(db, 0, -1), db, ""},
		{"etcd database pages garbage", garble(db, 8192, -1), db, ""},
		{"etcd database truncated", func(t *testing.T, dir string) { must(t, "truncating", os.Truncate(filepath.Join(dir, db), 64<<10)) }, db, ""},
		{"etcd database empty", func(t *testing.T, dir string) { must(t, "truncating", os.Truncate(filepath.Join(dir, db), 0)) }, db, ""},
		{"etcd write-ahead log garbage", func(t *testing.T, dir string) { garble(wal(dir), 0, 3000)(t, dir) }, "etcd", ""},
		{"etcd write-ahead log checksum", func(t *testing.T, dir string) { garble(wal(dir), 2000, 3000)(t, dir) }, "etcd", ""},
		{"etcd directory removed", func(t *testing.T, dir string) { must(t, "removing etcd", os.RemoveAll(filepath.Join(dir, "etcd"))) }, "etcd", ""},
		{"CA key garbage", func(t *testing.T, dir string) {
			must(t, "writing", os.WriteFile(filepath.Join(dir, "pki", "ca.key"), []byte("not a key\n"), 0o600))
		}, "pki", ""},
		{"CA key removed", func(t *testing.T, dir string) { must(t, "removing", os.Remove(filepath.Join(dir, "pki", "ca.key"))) }, "pki", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, "copying the data dir", copyDataDir(in.DataDir, dir))
			c.damage(t, dir)
			kept := c.kept
			if kept == "" {
				kept = c.path
			}
			before := treeDigest(t, filepath.Join(dir, kept))

			out, code, took := runUp(t, ctx, dir, args)
			t.Logf("refused in %s with exit code %d", took.Round(time.Millisecond), code)
			if code == 0 || strings.Contains(out, "ready in ") {
				t.Fatalf("rayctl up started on a damaged data dir (exit code %d):\n%s", code, out)
			}
			for _, want := range []string{"refusing to start", filepath.Join(dir, c.path), "rayctl down --delete-data --data-dir " + dir} {
				if !strings.Contains(out, want) {
					t.Errorf("the message does not mention %q:\n%s", want, out)
				}
			}
			if after := treeDigest(t, filepath.Join(dir, kept)); after != before {
				t.Errorf("%s changed during the refused start: %s, was %s", kept, after, before)
			}
		})
	}

	t.Run("undamaged copy", func(t *testing.T) {
		dir := t.TempDir()
		must(t, "copying the data dir", copyDataDir(in.DataDir, dir))
		cp, err := framework.Start(dir, args...)
		must(t, "starting on the copy", err)
		defer cp.Stop()
		cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || cm.Data["k"] != "v" {
			t.Fatalf("the ConfigMap on the copy: %v, %v", cm, err)
		}
	})
}

// runUp runs `rayctl up` on dir until it exits (the context bounds it) and returns its output, exit
// code and how long it ran.
func runUp(t *testing.T, ctx context.Context, dir string, args []string) (string, int, time.Duration) {
	t.Helper()
	bin, err := framework.Binary()
	must(t, "the rayctl binary", err)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"up", "--data-dir", dir, "--port", "0"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, took
	case errors.As(err, &exit):
		if ctx.Err() != nil {
			t.Fatalf("rayctl up did not exit within 2 minutes:\n%s", out.String())
		}
		return out.String(), exit.ExitCode(), took
	}
	t.Fatalf("running rayctl up: %v", err)
	return "", 0, 0
}

// copyDataDir copies a stopped instance's data dir: its files, not its lock.
func copyDataDir(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case info.IsDir():
			return os.MkdirAll(target, 0o700)
		case !info.Mode().IsRegular() || rel == "rayctl.lock":
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// treeDigest sums the names and contents of the files under path ("absent" when there is none).
func treeDigest(t *testing.T, path string) string {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "absent"
	}
	h := sha256.New()
	err := filepath.Walk(path, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		fmt.Fprintf(h, "%s\n", p)
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(h, f)
		return err
	})
	must(t, "digesting "+path, err)
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}
