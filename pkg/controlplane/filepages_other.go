//go:build !linux

package controlplane

// dropBinaryPages does nothing off Linux.
func dropBinaryPages() (int64, error) { return 0, nil }
