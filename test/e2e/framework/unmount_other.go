//go:build !linux

package framework

import "errors"

// unmountDetached has nothing to unmount off Linux, where rayctl mounts no namespaces.
func unmountDetached(string) error { return errors.New("no namespace mounts off Linux") }
