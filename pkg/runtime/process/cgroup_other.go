//go:build !linux

package process

import (
	"errors"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// makeCgroups applies no limits: there are no cgroups on this platform.
func makeCgroups(string, runtime.Resources) ([]runtime.Mount, error) {
	return nil, errors.New("resource limits need Linux cgroups, not on this platform")
}

// removeCgroups has nothing to remove on this platform.
func removeCgroups([]runtime.Mount) {}
