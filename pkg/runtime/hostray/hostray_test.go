package hostray_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayctl/rayctl/pkg/runtime/hostray"
)

// script writes an executable shell script named ray into a directory of its own.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ray")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindRefusesWhatIsNoRay(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"fails", "echo 'ray: command not found' >&2; exit 127", "ray: command not found"},
		{"another program", "echo 'hello 1.0'", `answered "hello 1.0", not a Ray version`},
		// /bin/sh has no Ray's extras: a bare ray without ray[default] is refused, saying so.
		{"no extras", "echo 'ray, version 2.60.0'", "without the dashboard's extras (install ray[default])"},
	} {
		p := script(t, tc.body)
		_, err := hostray.Find(ctx, []string{p}, true, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Find = %v, want an error saying %q", tc.name, err, tc.want)
		}
		// Not required: skipped, and Find says why none works.
		_, err = hostray.Find(ctx, []string{p}, false, "")
		if !errors.Is(err, hostray.ErrNotFound) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Find (not required) = %v, want ErrNotFound saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := hostray.Find(ctx, []string{filepath.Join(t.TempDir(), "none")}, false, ""); !errors.Is(err, hostray.ErrNotFound) {
		t.Errorf("no candidate there: %v, want ErrNotFound", err)
	}
}

// TestFindTheMakeRayVenv finds the pinned Ray that `make ray` installs, and remembers it.
func TestFindTheMakeRayVenv(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ray := filepath.Join(root, "_output", "ray", "bin", "ray")
	if _, err := os.Stat(ray); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Ray at %s: .ci/run installs it with make ray", ray)
		}
		t.Skipf("no Ray at %s (make ray installs it)", ray)
	}
	cache := filepath.Join(t.TempDir(), "hostray.json")
	r, err := hostray.Find(context.Background(), []string{ray}, true, cache)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(root, "hack", "ray-version"))
	if !strings.Contains(string(want), "=="+r.Version) || r.BinDir != filepath.Dir(ray) || filepath.Dir(r.Python) != r.BinDir {
		t.Errorf("Find = %+v, want version pinned in hack/ray-version (%s) and the venv's python", r, strings.TrimSpace(string(want)))
	}
	if _, err := os.Stat(cache); err != nil {
		t.Errorf("the answer is not remembered: %v", err)
	}
	again, err := hostray.Find(context.Background(), []string{ray}, true, cache)
	if err != nil || *again != *r {
		t.Errorf("from the cache: %+v, %v; want %+v", again, err, r)
	}
}

// fakeRay writes, into a directory of its own, a python that answers like Ray's (logging each of its
// runs to log) and a ray script run by it.
func fakeRay(t *testing.T, log string) string {
	t.Helper()
	dir := t.TempDir()
	python := filepath.Join(dir, "python")
	body := "#!/bin/sh\necho \"$*\" >> " + log + "\n[ \"$1\" = -c ] && exit 0\necho 'ray, version 2.60.0'\n"
	if err := os.WriteFile(python, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	ray := filepath.Join(dir, "ray")
	if err := os.WriteFile(ray, []byte("#!"+python+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return ray
}

// TestFindRemembersEachExecutable: one cache file remembers the answers for several executables (as
// the per-user cache does for every data dir), so none is checked twice while it is unchanged, and a
// changed one is checked again.
func TestFindRemembersEachExecutable(t *testing.T) {
	ctx := context.Background()
	log := filepath.Join(t.TempDir(), "runs")
	runs := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
	a, b := fakeRay(t, log), fakeRay(t, log)
	cache := filepath.Join(t.TempDir(), "hostray.json")
	for _, p := range []string{a, b} {
		if r, err := hostray.Find(ctx, []string{p}, true, cache); err != nil || r.Version != "2.60.0" {
			t.Fatalf("Find(%s) = %v, %v", p, r, err)
		}
	}
	checked := runs()
	if checked != 4 {
		t.Fatalf("%d runs of python checking two executables, want 4 (--version and the extras each)", checked)
	}
	for _, p := range []string{a, b, a} {
		if r, err := hostray.Find(ctx, []string{p}, true, cache); err != nil || r.Path != p {
			t.Fatalf("Find(%s) from the cache = %v, %v", p, r, err)
		}
	}
	if n := runs(); n != checked {
		t.Errorf("python ran %d more times for executables already checked, want none", n-checked)
	}
	// A changed executable is checked again.
	if err := os.WriteFile(a, []byte("#!"+filepath.Join(filepath.Dir(a), "python")+"\n# changed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := hostray.Find(ctx, []string{a}, true, cache); err != nil {
		t.Fatal(err)
	}
	if n := runs(); n != checked+2 {
		t.Errorf("python ran %d more times for a changed executable, want 2", n-checked)
	}
}
