package controlplane

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSimBinary: the raysim image carries the raysim beside rayctl only when that raysim reports
// rayctl's version; a stale or missing one, or an unversioned build, leaves rayctl itself.
func TestSimBinary(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "rayctl")
	if err := os.WriteFile(self, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sim := filepath.Join(dir, "raysim")
	if got := simBinary(self, "abc123"); got != self {
		t.Errorf("no raysim beside rayctl: got %s", got)
	}
	// A raysim answering --version as raysim does.
	script := "#!/bin/sh\n[ \"$1\" = --version ] && echo 'ray, version abc123+raysim (raysim, an offline stand-in for Ray)'\n"
	if err := os.WriteFile(sim, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := simBinary(self, "abc123"); got != sim {
		t.Errorf("raysim of the same version: got %s, want %s", got, sim)
	}
	if got := simBinary(self, "def456"); got != self {
		t.Errorf("raysim of another version: got %s", got)
	}
	if got := simBinary(self, "dev"); got != self {
		t.Errorf("unversioned build: got %s", got)
	}
}
