package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/rayctl/rayctl/pkg/runtime/mimic"
)

// targetMaker makes the missing paths of an isolated container (mount
// targets, its working dir) in the calling thread's mount namespace without
// writing the host's filesystem: a path below a mount the container already
// has (a volume, its private /tmp or home) is made there, as a kubelet makes
// it in a volume; any other is made on a tmpfs that covers its nearest
// existing ancestor and shows that ancestor's entries as they were (see
// mimic.Cover). As root the host would otherwise keep dirs such as
// /var/run/secrets/ray.io for good, and rootless it may not make them at all.
type targetMaker struct {
	// mounts are the resolved paths of the container's mounts made so far.
	mounts []string
	// mimics are the dirs covered by mimic so far: each is a tmpfs of the
	// container's, the entries on it the host's.
	mimics []string
}

// mounted records that the container's path p (as given, resolved here) is now one of its mounts.
func (tm *targetMaker) mounted(p string) {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	tm.mounts = append(tm.mounts, filepath.Clean(p))
}

// make makes p, a dir when dir, else an empty file (with its parents), unless it exists.
func (tm *targetMaker) make(p string, dir bool) error {
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	anc := filepath.Dir(filepath.Clean(p))
	for {
		if _, err := os.Stat(anc); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		anc = filepath.Dir(anc)
	}
	anc, err := filepath.EvalSymlinks(anc)
	if err != nil {
		return err
	}
	if !underAny(anc, tm.mounts) && !slices.Contains(tm.mimics, anc) {
		if err := mimic.Cover(anc); err != nil {
			return fmt.Errorf("covering %s with a tmpfs: %w", anc, err)
		}
		tm.mimics = append(tm.mimics, anc)
	}
	if dir {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
