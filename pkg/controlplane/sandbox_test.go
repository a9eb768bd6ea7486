package controlplane

import (
	"errors"
	"strings"
	"testing"
)

func TestDecideSandbox(t *testing.T) {
	yes := func() error { return nil }
	no := func() error { return errors.New("user.max_user_namespaces is 0") }
	for _, c := range []struct {
		name, podNetwork, goos string
		root, inside           bool
		supported              func() error
		mode                   string
		reexec                 bool
		why, err               string
	}{
		{name: "root", goos: "linux", root: true, supported: no, mode: SandboxRoot, why: "node namespace (root"},
		{name: "user, namespaces allowed", goos: "linux", supported: yes, mode: SandboxRootless, reexec: true},
		{name: "inside the user namespace", goos: "linux", inside: true, supported: no, mode: SandboxRootless, why: "rootless"},
		{name: "user, namespaces refused", goos: "linux", supported: no, mode: SandboxHost, why: "user.max_user_namespaces is 0"},
		{name: "user, namespaces refused, sandbox asked", podNetwork: PodNetworkSandbox, goos: "linux", supported: no, err: "user.max_user_namespaces is 0"},
		{name: "macOS", goos: "darwin", supported: yes, mode: SandboxHost, why: "Linux-only"},
		{name: "macOS, sandbox asked", podNetwork: PodNetworkSandbox, goos: "darwin", supported: yes, err: "Linux-only"},
		{name: "host asked as root", podNetwork: PodNetworkHost, goos: "linux", root: true, supported: yes, mode: SandboxHost, why: "--pod-network=host"},
		{name: "a typo", podNetwork: "bridge", goos: "linux", root: true, supported: yes, err: `--pod-network="bridge"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := decideSandbox(c.podNetwork, c.goos, c.root, c.inside, c.supported)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || got.Mode != c.mode || got.Reexec != c.reexec || !strings.Contains(got.Why, c.why) {
				t.Fatalf("got %+v, %v; want mode %s, reexec %v, why saying %q", got, err, c.mode, c.reexec, c.why)
			}
		})
	}
}
