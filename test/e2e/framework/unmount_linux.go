package framework

import "syscall"

// unmountDetached unmounts path lazily (MNT_DETACH).
func unmountDetached(path string) error { return syscall.Unmount(path, syscall.MNT_DETACH) }
