package main

import (
	"github.com/spf13/cobra"

	"github.com/rayctl/rayctl/pkg/datadir"
)

// globalFlags are the flags every command shares.
type globalFlags struct {
	dataDir string
}

func newRootCommand() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "rayctl",
		Short:         "A local Ray control plane: etcd, a Kubernetes API server, a kubelet and KubeRay-compatible controllers in one process",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.PersistentFlags().StringVar(&g.dataDir, "data-dir", datadir.Default(), "where rayctl keeps its state (default $RAYCTL_HOME or ~/.rayctl)")
	root.AddCommand(
		newUpCommand(g),
		newDownCommand(g),
		newStatusCommand(g),
		newVersionCommand(),
		newKubeconfigCommand(g),
		newImageCommand(g),
		newTraceCommand(g),
		newDiagnoseCommand(g),
		newDemoCommand(g),
		newUICommand(g),
		newGetCommand(g),
		newGatewayProxyCommand(),
		&cobra.Command{Use: "kubectl [args...]", Short: "Run kubectl against rayctl's API server", DisableFlagParsing: true},
		&cobra.Command{Use: "ray [args...]", Short: "Run raysim, the offline Ray stand-in", DisableFlagParsing: true},
	)
	return root
}
