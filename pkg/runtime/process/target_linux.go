package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rayctl/rayctl/pkg/runtime/mimic"
)

// targetMaker makes the missing paths of an isolated container (mount
// targets, its working dir) in the calling thread's mount namespace, never
// in the host's filesystem outside the container's own mounts: a path below a
// mount the container already has (a volume, its private /tmp or home) is
// made there, as a kubelet makes it in a volume; any other is made on a tmpfs that covers its nearest
// existing ancestor and shows that ancestor's entries as they were (see
// mimic.Cover). As root the host would otherwise keep dirs such as
// /var/run/secrets/ray.io for good, and rootless it may not make them at all.
type targetMaker struct {
	// ours are the resolved paths that are the container's own: its mounts
	// made so far and what was made on a mimic's tmpfs.
	ours []string
	// mimics are the dirs covered by mimic.Cover so far: each is a tmpfs of
	// the container's, the entries on it the host's.
	mimics []string
}

// mounted records that the container's path p (as given, resolved here) is now one of its mounts.
func (tm *targetMaker) mounted(p string) {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	tm.ours = append(tm.ours, filepath.Clean(p))
}

// create makes p, an absolute path, a dir when dir, else an empty file (with
// its parents), unless it exists. A symbolic link to nothing at p is never
// followed (it would make its target on the host): on a tmpfs of the
// container's it is replaced, below one of its mounts refused.
func (tm *targetMaker) create(p string, dir bool) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%s is not an absolute path", p)
	}
	p = filepath.Clean(p)
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	existing, dangling := filepath.Dir(p), false
	if _, err := os.Lstat(p); err == nil {
		dangling = true
	} else {
		for {
			if _, err := os.Stat(existing); err == nil {
				break
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			existing = filepath.Dir(existing)
		}
	}
	anc, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return err
	}
	if underAny(anc, tm.ours) {
		if dangling {
			return fmt.Errorf("%s is a symbolic link to nothing", p)
		}
	} else {
		if !slices.Contains(tm.mimics, anc) {
			if err := mimic.Cover(anc); err != nil {
				return fmt.Errorf("covering %s with a tmpfs: %w", anc, err)
			}
			tm.mimics = append(tm.mimics, anc)
		}
		if dangling { // the link's copy on the tmpfs
			if err := os.Remove(p); err != nil {
				return err
			}
		}
		// What is made below anc is on the tmpfs.
		rel, err := filepath.Rel(existing, p)
		if err != nil {
			return err
		}
		tm.ours = append(tm.ours, filepath.Join(anc, strings.SplitN(rel, string(filepath.Separator), 2)[0]))
	}
	if dir {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
