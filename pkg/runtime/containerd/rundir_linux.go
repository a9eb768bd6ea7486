package containerd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rayctl/rayctl/pkg/runtime/mimic"
)

// shimRunDir is where containerd 1.6's runc shims put their sockets and runc its state, whatever
// containerd's configuration says: a directory only the host's root may write.
const shimRunDir = "/run/containerd"

// privateRunDir gives a containerd run inside rayctl's user namespace (rootless) a /run/containerd of
// its own, in rayctl's private mount namespace: /run becomes a fresh tmpfs on which each of the host's
// entries is mounted again in place (mimic.Cover), beside an empty containerd directory. Programs in
// the namespace, the process runtime's containers among them, see the host's /run as before; nothing
// outside rayctl's namespace sees a change, and no mount of the host's /run is left anywhere else
// (under the data dir, a removal would walk into it). Done once per namespace: a second call finds the
// marker and returns. Only for inside a user namespace of rayctl's: as root, containerd's own
// /run/containerd is right.
func privateRunDir() error {
	marker := filepath.Join("/run", ".rayctl-private")
	if _, err := os.Stat(marker); err == nil {
		return nil // made already by this rayctl
	}
	if err := mimic.Cover("/run", filepath.Base(shimRunDir)); err != nil {
		return fmt.Errorf("mounting a private /run for containerd's shims: %w", err)
	}
	return errors.Join(os.Mkdir(shimRunDir, 0o700), os.WriteFile(marker, nil, 0o600))
}
