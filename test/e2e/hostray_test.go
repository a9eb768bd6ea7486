package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// hostRay is the venv `make ray` makes beside the rayctl under test, or the test is skipped (outside CI)
// or fails (in CI, where .ci/run installs it) saying why.
func hostRay(t *testing.T) string {
	t.Helper()
	bin, err := framework.Binary()
	must(t, "the rayctl binary", err)
	ray := filepath.Join(filepath.Dir(filepath.Dir(bin)), "ray", "bin", "ray")
	if _, err := os.Stat(ray); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Ray at %s: .ci/run installs it with `make ray` (%v)", ray, err)
		}
		t.Skipf("no Ray at %s (`make ray` installs the pinned ray[default]); this test runs real Ray", ray)
	}
	return ray
}

// TestHostRayIsFound starts rayctl on the process runtime beside the `make ray` venv: it says at start-up
// that the host's Ray, with its version and path, runs Ray's images, and raysim rayctl's own image.
// --ray=sim says raysim runs both; --ray=host with a path that is no Ray refuses to start, naming it.
func TestHostRayIsFound(t *testing.T) {
	t.Parallel()
	ray := hostRay(t)
	args := append(framework.ControlPlaneOnly(), "--runtime", "process")
	in, err := framework.Start("", args...)
	if err != nil {
		t.Fatalf("rayctl up: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	line := regexp.MustCompile(`(?m)^  ray .*$`).FindString(in.Output.String())
	want := "host Ray 2.60.0 (" + ray + ") for rayproject/ray images; raysim for rayctl.local/raysim:latest"
	if !strings.HasSuffix(line, want) {
		t.Errorf("the start-up's ray line is %q, want it to end in %q\n%s", line, want, in.Output.String())
	}
	must(t, "stopping", in.Stop())

	in.ExtraArgs = append(in.ExtraArgs, "--ray", "sim")
	must(t, "rayctl up --ray sim", in.Restart())
	if line := regexp.MustCompile(`(?m)^  ray .*$`).FindString(in.Output.String()); !strings.Contains(line, "raysim for rayproject/ray images and rayctl.local/raysim:latest (--ray=sim)") {
		t.Errorf("with --ray=sim the ray line is %q", line)
	}
	must(t, "stopping", in.Stop())

	notRay := filepath.Join(t.TempDir(), "ray")
	must(t, "writing a ray that is none", os.WriteFile(notRay, []byte("#!/bin/sh\necho 'command not found' >&2; exit 127\n"), 0o755))
	in.ExtraArgs = append(in.ExtraArgs, "--ray", "host", "--ray-path", notRay)
	err = in.Restart()
	if err == nil || !strings.Contains(err.Error(), notRay+" --version") || !strings.Contains(err.Error(), "command not found") {
		t.Errorf("rayctl up --ray host --ray-path %s: %v, want a refusal naming it and what it said", notRay, err)
	}
}
