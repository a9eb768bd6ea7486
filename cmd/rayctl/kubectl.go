package main

import (
	"os"
	"strings"

	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"

	"github.com/rayctl/rayctl/pkg/datadir"
)

// runKubectl runs the real kubectl built into rayctl. Unless --kubeconfig or KUBECONFIG says otherwise,
// it talks to the rayctl instance of $RAYCTL_HOME (or ~/.rayctl).
func runKubectl(args []string) int {
	if os.Getenv("KUBECONFIG") == "" && !hasFlag(args, "kubeconfig") {
		if d, err := datadir.Open(dataDirFromArgs(args)); err == nil {
			os.Setenv("KUBECONFIG", d.Kubeconfig())
		}
	}
	args = withoutFlag(args, "data-dir")
	os.Args = append([]string{"kubectl"}, args...)
	return cli.Run(kubectlcmd.NewDefaultKubectlCommand())
}

// dataDirFromArgs finds --data-dir among args, else the default.
func dataDirFromArgs(args []string) string {
	for i, a := range args {
		if a == "--data-dir" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			return v
		}
	}
	return datadir.Default()
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--"+name {
			return true
		}
		if _, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return true
		}
	}
	return false
}

// withoutFlag drops --name VALUE and --name=VALUE from args.
func withoutFlag(args []string, name string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--"+name {
			i++
			continue
		}
		if _, ok := strings.CutPrefix(args[i], "--"+name+"="); ok {
			continue
		}
		out = append(out, args[i])
	}
	return out
}
