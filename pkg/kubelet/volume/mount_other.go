//go:build !linux

package volume

import (
	"errors"
	"runtime"
)

// errNoTmpfs says memory-backed emptyDirs are plain directories on this platform.
var errNoTmpfs = errors.New("memory-backed emptyDir (a tmpfs mount) is not supported on " + runtime.GOOS)

// mountTmpfs fails: rayctl mounts tmpfs on Linux only.
func mountTmpfs(target, opts string) error { return errNoTmpfs }

// unmountDetached fails: no tmpfs was mounted here.
func unmountDetached(path string) error { return errNoTmpfs }
