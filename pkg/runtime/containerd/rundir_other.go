//go:build !linux

package containerd

// privateRunDir does nothing off Linux, where containerd does not run rayctl's pods.
func privateRunDir() error { return nil }
