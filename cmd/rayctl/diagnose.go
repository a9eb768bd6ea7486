package main

import (
	"encoding/json"
	"fmt"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
	"github.com/rayctl/rayctl/pkg/diagnose"
)

type diagnoseOptions struct {
	output string
}

func newDiagnoseCommand(g *globalFlags) *cobra.Command {
	o := &diagnoseOptions{}
	var cluster *clusterFlags
	cmd := &cobra.Command{
		Use:   "diagnose KIND/NAME",
		Short: "Explain why the Ray controllers did not act on a Pod, RayCluster, RayJob or RayService: each check of the trigger chain with its evidence",
		Long: `Walk the trigger chain's checklist for a Pod, RayCluster, RayJob or RayService and print each check (✓ holds,
✗ fails, – does not apply) with the evidence it used:

  a) the object's namespace is one the controllers watch (--watch-namespace)
  b) its labels pass the controllers' cache label selector
  c) the controllers' identity may get, list and watch it (SubjectAccessReviews)
  d) a Pod has a controller ownerReference to an existing RayCluster with its UID
  e) the RayCluster's latest updates passed the For() predicate (status-only ones are dropped)
  f) the controller reconciled after the last change, and how that pass ended
  g) the RayCluster's state and conditions, and the Pods that keep it from ready
  h) the RayJob's state, dashboard URL, submission attempts and what it waits for
  i) the controllers' queue depth, busy workers and reconcile concurrency
  j) a RayService's Serve config deployed, its applications RUNNING, its serve Service's endpoints

A RayJob or RayService is diagnosed with its RayCluster (a RayService's pending one while it has
one) and head Pod, a Pod with its owner RayCluster. The last
line names the most likely cause — the first failing check in chain order — and what to do.`,
		Example: `  rayctl diagnose rayjob/rayjob-sample
  rayctl diagnose pod/raycluster-sample-head-x7k2p -n team-a
  rayctl diagnose raycluster/raycluster-sample -o json
  rayctl diagnose rayservice/rayservice-sample`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := parseObjectArg(args[0])
			if err != nil {
				return err
			}
			switch kind {
			case diagnose.KindPod, diagnose.KindRayCluster, diagnose.KindRayJob, diagnose.KindRayService:
			default:
				return fmt.Errorf("diagnose follows pods, rayclusters, rayjobs and rayservices, not %s", kind)
			}
			if o.output != "text" && o.output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", o.output)
			}
			cfg, ns, err := connectCluster(g.dataDir, cluster)
			if err != nil {
				return err
			}
			clients, err := diagnoseClients(cfg)
			if err != nil {
				return err
			}
			in, err := diagnose.Gather(cmd.Context(), clients, kind, ns, name)
			if err != nil {
				return err
			}
			report := diagnose.Run(in)
			out := cmd.OutOrStdout()
			if o.output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(report)
			}
			diagnose.WriteText(out, report, diagnose.TextOptions{Color: isTerminal(out)})
			return nil
		},
	}
	cluster = addClusterFlags(cmd, "default")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json")
	return cmd
}

// diagnoseClients are the clients diagnose reads with: the chain recorder, client-go and ray.io.
func diagnoseClients(cfg *rest.Config) (diagnose.Clients, error) {
	cc, err := chainhttp.NewClient(cfg)
	if err != nil {
		return diagnose.Clients{}, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return diagnose.Clients{}, err
	}
	ray, err := rayclient.NewForConfig(cfg)
	if err != nil {
		return diagnose.Clients{}, err
	}
	return diagnose.Clients{Kube: kube, Ray: ray, Chain: cc}, nil
}
