package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/pkg/apiserver/kubeconfig"
	"github.com/rayctl/rayctl/pkg/datadir"
)

func newKubeconfigCommand(g *globalFlags) *cobra.Command {
	var merge bool
	var into string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the kubeconfig's path, or with --merge add a `rayctl` context to ~/.kube/config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := datadir.Open(g.dataDir)
			if err != nil {
				return err
			}
			if _, err := os.Stat(dir.Kubeconfig()); err != nil {
				return fmt.Errorf("no kubeconfig yet in %s: run `rayctl up` first", dir.Path)
			}
			if !merge {
				fmt.Fprintln(cmd.OutOrStdout(), dir.Kubeconfig())
				return nil
			}
			cfg, err := clientcmd.LoadFromFile(dir.Kubeconfig())
			if err != nil {
				return err
			}
			if err := kubeconfig.Merge(into, cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added context %q to %s; use it with `kubectl --context %s`\n", kubeconfig.ContextName, into, kubeconfig.ContextName)
			return nil
		},
	}
	home, _ := os.UserHomeDir()
	cmd.Flags().BoolVar(&merge, "merge", false, "add rayctl's cluster, user and context to another kubeconfig")
	cmd.Flags().StringVar(&into, "into", filepath.Join(home, ".kube", "config"), "the kubeconfig --merge writes to")
	return cmd
}
