package pki

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBrokenCAIsNotReplaced: a CA with a file missing, unreadable or mismatched is refused with a
// BrokenCAError and left as it is; only a directory with neither file gets a new CA.
func TestBrokenCAIsNotReplaced(t *testing.T) {
	other := t.TempDir()
	if _, err := LoadOrCreate(other); err != nil {
		t.Fatal(err)
	}
	otherKey, _ := os.ReadFile(filepath.Join(other, "ca.key"))
	cases := map[string]func(dir string){
		"key missing":  func(dir string) { os.Remove(filepath.Join(dir, "ca.key")) },
		"cert missing": func(dir string) { os.Remove(filepath.Join(dir, "ca.crt")) },
		"key garbage":  func(dir string) { os.WriteFile(filepath.Join(dir, "ca.key"), []byte("garbage\n"), 0o600) },
		"cert garbage": func(dir string) {
			os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o600)
		},
		"another key": func(dir string) { os.WriteFile(filepath.Join(dir, "ca.key"), otherKey, 0o600) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := LoadOrCreate(dir); err != nil {
				t.Fatal(err)
			}
			damage(dir)
			before, _ := os.ReadDir(dir)
			_, err := LoadOrCreate(dir)
			var broken *BrokenCAError
			if !errors.As(err, &broken) || broken.Dir != dir {
				t.Fatalf("LoadOrCreate = %v, want a BrokenCAError for %s", err, dir)
			}
			t.Log(err)
			if after, _ := os.ReadDir(dir); len(after) != len(before) {
				t.Errorf("the pki directory changed: %d files before, %d after", len(before), len(after))
			}
		})
	}
	dir := t.TempDir()
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "ca.key"))
	os.Remove(filepath.Join(dir, "ca.crt"))
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatalf("a pki directory without a CA: %v, want a new CA", err)
	}
}
