// Package userns lets rayctl run as an ordinary user on Linux: Reexec starts
// rayctl again in a new user namespace, where it is uid 0 mapped to the
// invoking user, and a new mount namespace. It does not start a new network
// namespace, so the API server still listens on the host's 127.0.0.1; with
// the capabilities it holds over the namespaces it creates, rayctl can then
// make network namespaces of its own (a node's, with a bridge, and one per
// pod) and bind-mount their files, as `ip netns add` does, in its private
// mount namespace.
//
// The launcher side:
//
//	if os.Getuid() != 0 && !userns.Inside() {
//		if err := userns.Supported(); err != nil {
//			return err
//		}
//		code, err := userns.Reexec(os.Args[1:], nil)
//		...
//		os.Exit(code)
//	}
//
// and the child side, before it mounts anything:
//
//	if userns.Inside() {
//		if err := userns.PrivateMounts(); err != nil {
//			return err
//		}
//	}
//
// Inside, uid 0 and gid 0 are the user; ids 1… are the user's subordinate
// ids where it has them and newuidmap/newgidmap are installed
// (SubordinateIDs), so that containerd can unpack images whose files belong
// to other users. Without them only 0 is mapped (MappedUID, MappedGID) and
// setgroups(2) is denied (SetgroupsAllowed), so a process started there as
// another user cannot be, and one started with a syscall.Credential needs
// NoSetGroups.
package userns

// MarkerEnv is the environment variable Reexec sets to "1" for the process it
// starts; Inside reads it. Processes that process starts inherit it, which is
// right as long as they stay in its user namespace.
const MarkerEnv = "RAYCTL_USERNS"
