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
	output   string
	operator diagnose.OperatorOptions
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
line names the most likely cause — the first failing check in chain order — and what to do.

Where no rayctl controller acts on a kind (rayctl up --controllers=none, or --kubeconfig naming
another cluster), the checks look at the operator outside rayctl (KubeRay's) through what it
exposes, first checking it runs (o): its Deployment and args, its Lease ray-operator-leader, the
lists, watches, writes and proxy calls rayctl's API server saw it make, SubjectAccessReviews of its
identity for each verb the chain needs, its Events and the status it wrote, and its controller-runtime
metrics when reachable (--operator-metrics). For a running RayJob it asks Ray's dashboard, through
the API server's service proxy, for the Ray job's status (a job PENDING on its runtime env).`,
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
			clients.Operator = o.operator
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
	cmd.Flags().StringVar(&o.operator.User, "operator-user", "", "the identity an operator outside rayctl (KubeRay's) acts as, for its RBAC checks (default: its Deployment's service account, or the user the API server saw send its requests)")
	cmd.Flags().StringVar(&o.operator.WatchNamespaces, "operator-watch-namespace", "", "that operator's --watch-namespace, comma-separated, * for all (default: its Deployment's args, or the namespaces the API server saw it watch)")
	cmd.Flags().StringVar(&o.operator.MetricsURL, "operator-metrics", "", "the URL of that operator's controller-runtime metrics, e.g. http://127.0.0.1:8080/metrics (default: its Deployment's Pod on :8080, through the API server)")
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
