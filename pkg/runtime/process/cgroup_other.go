//go:build !linux

package process

import "github.com/rayctl/rayctl/pkg/runtime"

// makeCgroups applies no limits: there are no cgroups on this platform.
func makeCgroups(string, runtime.Resources) ([]runtime.Mount, error) {
	return nil, errNoCgroups
}

// removeCgroups has nothing to remove on this platform.
func removeCgroups([]runtime.Mount) {}
