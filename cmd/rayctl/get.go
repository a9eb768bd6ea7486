package main

import (
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
)

func newGetCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show what a Ray cluster's users need, as KubeRay's kubectl plugin (kubectl ray get) shows it",
	}
	cmd.AddCommand(newGetTokenCommand(g))
	return cmd
}

func newGetTokenCommand(g *globalFlags) *cobra.Command {
	var cluster *clusterFlags
	var account string
	cmd := &cobra.Command{
		Use:   "token CLUSTER",
		Short: "Print a token a RayCluster's Ray accepts (spec.authOptions.mode token), for RAY_AUTH_TOKEN",
		Long: `Print a token of a RayCluster whose Ray requires one, with no newline, for RAY_AUTH_TOKEN. Ray's CLI and SDK
send it when RAY_AUTH_TOKEN holds it; the dashboard takes it as "Authorization: Bearer <token>".

Ray's token authentication (spec.authOptions.mode token, or any cluster whose pods share the host's network):
the token of the cluster's Secret, as kubectl ray get token prints it.

Kubernetes-delegated token authentication (spec.authOptions.enableK8sTokenAuth): Ray accepts the token of any
identity the API server authenticates and allows verb ray:write on the RayCluster; this prints a new token
(an hour) of the service account --service-account names, by default the head's (which Ray's own processes
need to have ray:write on the cluster), as kubectl create token would.`,
		Example: `  export RAY_AUTH_TOKEN=$(rayctl get token ray-cluster-with-auth)
  rayctl kubectl port-forward svc/ray-cluster-with-auth-head-svc 8265:8265 &
  ray job submit --address http://127.0.0.1:8265 -- python -c 'import ray; ray.init()'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, ns, err := connectCluster(g.dataDir, cluster)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: ctrlset.Scheme()})
			if err != nil {
				return err
			}
			var rc rayv1.RayCluster
			if err := c.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: args[0]}, &rc); err != nil {
				return fmt.Errorf("reading RayCluster %s/%s: %w", ns, args[0], err)
			}
			if account != "" && !raycluster.K8sTokenAuth(&rc.Spec) {
				return fmt.Errorf("--service-account: RayCluster %s/%s does not delegate token authentication to Kubernetes (spec.authOptions.enableK8sTokenAuth): its Ray takes its Secret's token only", ns, rc.Name)
			}
			token, err := raycluster.UserToken(cmd.Context(), c, &rc, account)
			if err != nil {
				return err
			}
			if token == "" {
				return fmt.Errorf("RayCluster %s/%s does not use token authentication (spec.authOptions.mode is not token): its Ray takes no token", ns, rc.Name)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), token)
			return err
		},
	}
	cluster = addClusterFlags(cmd, "default")
	cmd.Flags().StringVar(&account, "service-account", "", "with spec.authOptions.enableK8sTokenAuth: the service account (in the cluster's namespace) whose token to print (default: the head's)")
	return cmd
}
