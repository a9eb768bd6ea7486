//go:build !linux && !darwin

package raysim

// sameExecutable cannot tell here what pid runs, so `ray stop` leaves it alone rather than risk
// signalling an unrelated process that reused the pid.
func sameExecutable(int, string) bool { return false }

// isZombie cannot tell here; a zombie counts as alive until its grace period ends.
func isZombie(int) bool { return false }
