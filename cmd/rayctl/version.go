package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/rayctl/rayctl/pkg/apiserver"
)

// Version is rayctl's own version, stamped at link time by the Makefile.
var Version = "dev"

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print rayctl's version and the Kubernetes API version it serves",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "rayctl %s\nkubernetes %s\ngo %s %s/%s\n", Version, apiserver.KubernetesVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
