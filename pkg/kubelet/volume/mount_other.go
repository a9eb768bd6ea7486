//go:build !linux

package volume

import (
	"errors"
	"runtime"
)

// tmpfsHere says a memory-backed emptyDir is a plain directory on this platform (no tmpfs mounts).
const tmpfsHere = false

// errNoTmpfs says memory-backed emptyDirs are plain directories on this platform.
var errNoTmpfs = errors.New("memory-backed emptyDir (a tmpfs mount) is not supported on " + runtime.GOOS)

// mountTmpfs fails: rayctl mounts tmpfs on Linux only (emptyDir does not call it here).
func mountTmpfs(target, opts string) error { return errNoTmpfs }

// unmountDetached fails: no tmpfs was mounted here.
func unmountDetached(path string) error { return errNoTmpfs }
