package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/apiserver/kubeconfig"
	"github.com/rayctl/rayctl/pkg/datadir"
)

func newStatusCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show whether rayctl is running, where, and what it serves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return status(cmd.Context(), cmd.OutOrStdout(), g.dataDir)
		},
	}
}

func status(ctx context.Context, out io.Writer, dataDir string) error {
	dir, err := datadir.Open(dataDir)
	if err != nil {
		return err
	}
	st, err := dir.ReadState()
	if errors.Is(err, datadir.ErrNotRunning) {
		fmt.Fprintf(out, "rayctl is not running (data dir %s)\n", dir.Path)
		return errors.New("not running")
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "rayctl is running (pid %d, data dir %s)\n", st.PID, dir.Path)
	fmt.Fprintf(out, "  api server   %s\n", st.Server)
	fmt.Fprintf(out, "  kubeconfig   %s\n", dir.Kubeconfig())
	if st.Sandbox != "" {
		fmt.Fprintf(out, "  sandbox      %s\n", st.Sandbox)
	}
	fmt.Fprintf(out, "  started in   %d ms", st.ReadyMillis)
	names := make([]string, 0, len(st.Components))
	for n := range st.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(out, "  %s %d ms", n, st.Components[n])
	}
	fmt.Fprintln(out)
	cfg, err := kubeconfig.RESTConfig(dir.Kubeconfig())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := apiserver.WaitReady(ctx, cfg); err != nil {
		fmt.Fprintf(out, "  readyz       not ready: %v\n", err)
		return errors.New("not ready")
	}
	fmt.Fprintf(out, "  readyz       ok\n")
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		fmt.Fprintf(out, "  nodes        %d\n", len(nodes.Items))
	}
	if pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
		fmt.Fprintf(out, "  pods         %d\n", len(pods.Items))
	}
	return nil
}
