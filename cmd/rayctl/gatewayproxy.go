package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/gatewayproxy"
)

// newGatewayProxyCommand is the data plane of rayctl's Gateway, run inside the pod the Gateway controller
// makes for each Gateway (not a command for users).
func newGatewayProxyCommand() *cobra.Command {
	var o gatewayproxy.Options
	cmd := &cobra.Command{
		Use:    "gateway-proxy",
		Short:  "Serve a Gateway's routes (run by rayctl's Gateway controller in the Gateway's pod)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Namespace == "" || o.ConfigMap == "" || len(o.BindIPs) == 0 {
				return errors.New("--namespace, --configmap and --bind are required")
			}
			cfg, err := rest.InClusterConfig()
			if err != nil {
				return err
			}
			if o.Client, err = kubernetes.NewForConfig(cfg); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return gatewayproxy.Run(ctx, o)
		},
	}
	cmd.Flags().StringVar(&o.Namespace, "namespace", "", "the namespace of the ConfigMap holding the routing table")
	cmd.Flags().StringVar(&o.ConfigMap, "configmap", "", "the ConfigMap holding the routing table")
	cmd.Flags().StringSliceVar(&o.BindIPs, "bind", nil, "addresses to listen on (the pod's IP and 127.0.0.1)")
	return cmd
}
