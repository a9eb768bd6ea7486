// Command rayctl runs a local Ray control plane: an embedded etcd, a Kubernetes API server, a kubelet and
// the RayCluster and RayJob controllers, in one process started by `rayctl up`.
//
// rayctl is also a multi-call binary: invoked as `kubectl` (or `rayctl kubectl …`) it is kubectl, and
// invoked as `ray` (or `rayctl ray …`) it is raysim, the offline Ray stand-in; invoked as `submitter` (or
// `rayctl submitter …`) it is the RayJob light-weight submitter (pkg/raysubmitter).
package main

import (
	"os"
	"path/filepath"

	// Before kubectl's command packages initialize: their messages' catalog is loaded only for a
	// language kubectl translates.
	_ "github.com/rayctl/rayctl/pkg/kubectli18n"
)

func main() {
	os.Exit(run(os.Args))
}

// run dispatches on the name the binary was called by, then on the first argument.
func run(args []string) int {
	switch filepath.Base(args[0]) {
	case "kubectl":
		return runKubectl(args[1:])
	case "ray":
		return runRay(args[1:])
	case "submitter":
		return runSubmitter(args[1:])
	}
	if len(args) > 1 {
		switch args[1] {
		case "kubectl":
			return runKubectl(args[2:])
		case "ray":
			return runRay(args[2:])
		case "submitter":
			return runSubmitter(args[2:])
		}
	}
	if err := newRootCommand().Execute(); err != nil {
		return 1
	}
	return 0
}
