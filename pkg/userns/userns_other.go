//go:build !linux

package userns

import "errors"

// errLinuxOnly is what every operation answers off Linux.
var errLinuxOnly = errors.New("user namespaces are Linux-only")

// Supported reports why rayctl cannot run in a user namespace here: user
// namespaces are Linux-only.
func Supported() error { return errLinuxOnly }

// Inside reports false: off Linux there are no user namespaces.
func Inside() bool { return false }

// Reexec fails off Linux: user namespaces are Linux-only.
func Reexec(args []string, env []string) (exitCode int, err error) { return -1, errLinuxOnly }

// PrivateMounts fails off Linux: there are no mount namespaces to change.
func PrivateMounts() error { return errLinuxOnly }

// MappedUID reports true: off Linux no user namespace restricts setuid.
func MappedUID(uid uint32) bool { return true }

// MappedGID reports true: off Linux no user namespace restricts setgid.
func MappedGID(gid uint32) bool { return true }

// SetgroupsAllowed reports true: off Linux no user namespace denies setgroups.
func SetgroupsAllowed() bool { return true }

// MapNoteEnv is the Linux variable saying why a user namespace maps no subordinate ids.
const MapNoteEnv = "RAYCTL_USERNS_IDS"

// SubordinateIDs reports true: off Linux no user namespace restricts ids.
func SubordinateIDs() (ok bool, why string) { return true, "" }

// SubordinateUIDs reports none: off Linux there are no user namespaces to map them into.
func SubordinateUIDs(uid int) (first, count uint32, ok bool) { return 0, 0, false }
