package e2e

// KubeRay v1.7's behaviour with its default feature gates: a RayJob's deletionStrategy
// (RayJobDeletionPolicy) and multi-host indexing of worker groups (RayMultiHostIndexing), on raysim.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestKubeRay17Defaults runs its cases on one instance of their own where raysim runs Ray's images,
// with a node that advertises room for KubeRay's 1-CPU samples.
func TestKubeRay17Defaults(t *testing.T) {
	t.Parallel()
	in := framework.StartTest(t, "--ray", "sim", "--node-capacity", "cpu=8,memory=16Gi")
	cases := map[string]func(t *testing.T, e *rayEnv){
		"DeletionRulesSample":     testDeletionRulesSample,
		"DeletionStrategyRefused": testDeletionStrategyRefused,
		"MultiHostIndexing":       testMultiHostIndexing,
	}
	for name, test := range cases {
		t.Run(name, func(t *testing.T) { test(t, raySetup(t, in)) })
	}
}

// (DeletionRulesSample) KubeRay's ray-job.deletion-rules.yaml, unchanged: its Python entrypoint fails on
// raysim (no Ray to import), and its FAILED rules delete the workers first (the worker groups
// suspended, the head kept), then the RayCluster, then the RayJob itself.
func testDeletionRulesSample(t *testing.T, e *rayEnv) {
	e.applySample(t, "ray-job.deletion-rules.yaml")
	e.followDeletionRules(t, e.waitJobFinished(t, deletionRulesSample))
}

// deletionRulesSample is the RayJob of KubeRay's ray-job.deletion-rules.yaml.
const deletionRulesSample = "rayjob-deletion-rules"

// followDeletionRules watches the sample's rules run on a RayJob that has ended: its workers gone
// (the worker groups suspended, the head kept), then its RayCluster, then the RayJob itself.
func (e *rayEnv) followDeletionRules(t *testing.T, job *rayv1.RayJob) {
	t.Helper()
	name, cluster := job.Name, job.Status.RayClusterName
	t.Logf("the RayJob ended %s/%s; its rules now run on RayCluster %s", job.Status.JobDeploymentStatus, job.Status.JobStatus, cluster)
	ended := time.Now()

	// The state each rule leaves lasts 30 s, so each is seen in turn.
	e.waitFor(t, rayTimeout, "the worker Pods gone, the head and the RayCluster kept (DeleteWorkers)", func(ctx context.Context) (bool, string, error) {
		c, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, "the RayCluster not read", err
		}
		heads, err := e.clusterPods(ctx, cluster, "head")
		if err != nil {
			return false, "", err
		}
		all, err := e.in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/node-type=worker,ray.io/cluster=" + cluster})
		if err != nil {
			return false, "", err
		}
		suspended := len(c.Spec.WorkerGroupSpecs) > 0
		for _, g := range c.Spec.WorkerGroupSpecs {
			suspended = suspended && ptr.Deref(g.Suspend, false)
		}
		desc := fmt.Sprintf("groups suspended %v; cluster deleting %v; head %s; workers %s", suspended, c.DeletionTimestamp != nil, podsState(heads), podsState(all.Items))
		return suspended && c.DeletionTimestamp == nil && len(heads) == 1 && len(all.Items) == 0, desc, nil
	})
	t.Logf("workers gone %s after the end was seen", time.Since(ended).Round(time.Second))

	e.waitFor(t, rayTimeout, "the RayCluster and its Pods gone, the RayJob kept (DeleteCluster)", func(ctx context.Context) (bool, string, error) {
		_, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, cluster, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", err
		}
		pods, perr := e.clusterPods(ctx, cluster, "")
		if perr != nil {
			return false, "", perr
		}
		j, jerr := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if jerr != nil {
			return false, "the RayJob not read", jerr
		}
		return apierrors.IsNotFound(err) && len(pods) == 0 && j.DeletionTimestamp == nil,
			fmt.Sprintf("cluster found %v; pods %s", err == nil, podsState(pods)), nil
	})
	t.Logf("cluster gone %s after the end was seen", time.Since(ended).Round(time.Second))

	e.waitFor(t, rayTimeout, "the RayJob gone (DeleteSelf)", func(ctx context.Context) (bool, string, error) {
		j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("RayJob %s, deleting %v", j.Status.JobDeploymentStatus, j.DeletionTimestamp != nil), nil
	})
	t.Logf("RayJob gone %s after the end was seen", time.Since(ended).Round(time.Second))
}

// deletionJob is configs/samples/rayjob-http.yaml as RayJob name, with the deletionStrategy given as
// YAML and shutdownAfterJobFinishes as given, as a manifest for kubectl.
func deletionJob(t *testing.T, name string, shutdown bool, strategy string) string {
	t.Helper()
	j := rayJobFromSample(t, "rayjob-http.yaml", name)
	j.Spec.ShutdownAfterJobFinishes = shutdown
	j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{}
	must(t, "decoding the deletionStrategy", yaml.UnmarshalStrict([]byte(strategy), j.Spec.DeletionStrategy))
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(j)
	must(t, "converting the RayJob", err)
	delete(obj, "status")
	b, err := yaml.Marshal(obj)
	must(t, "encoding the RayJob", err)
	return string(b)
}

// (DeletionStrategyRefused) What KubeRay v1.7 refuses is refused: by the API server's schema (legacy
// policies beside rules: kubectl apply fails with a 422 naming the rule), or by the controller, which
// parks the RayJob in ValidationFailed with v1.7's message and an InvalidRayJobSpec event (rules
// beside shutdownAfterJobFinishes; TTLs that would delete the cluster before its workers).
func testDeletionStrategyRefused(t *testing.T, e *rayEnv) {
	mixed := deletionJob(t, "mixed", false, `
onSuccess: {policy: DeleteCluster}
onFailure: {policy: DeleteCluster}
deletionRules: [{policy: DeleteCluster, condition: {jobStatus: FAILED}}]`)
	_, stderr, err := e.in.Kubectl(e.ctx, mixed, "apply", "-n", e.ns, "-f", "-")
	if err == nil || !strings.Contains(stderr, "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together") {
		t.Errorf("kubectl apply of legacy policies beside rules: %v %s; want a refusal naming the rule", err, stderr)
	}

	for _, tc := range []struct {
		name           string
		shutdown       bool
		strategy, want string
	}{
		{"with-shutdown", true, `deletionRules: [{policy: DeleteCluster, condition: {jobStatus: SUCCEEDED}}]`,
			"The RayJob spec is invalid: spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"},
		{"out-of-order", false, `
deletionRules:
- {policy: DeleteWorkers, condition: {jobStatus: SUCCEEDED, ttlSeconds: 20}}
- {policy: DeleteCluster, condition: {jobStatus: SUCCEEDED, ttlSeconds: 10}}`,
			"for JobStatus 'SUCCEEDED': DeleteCluster TTL (10) must be >= DeleteWorkers TTL (20)"},
	} {
		out, stderr, err := e.in.Kubectl(e.ctx, deletionJob(t, tc.name, tc.shutdown, tc.strategy), "apply", "-n", e.ns, "-f", "-")
		must(t, "kubectl apply "+tc.name+": "+out+stderr, err)
		e.waitFor(t, time.Minute, "RayJob "+tc.name+" ValidationFailed with an InvalidRayJobSpec event", func(ctx context.Context) (bool, string, error) {
			j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			evs, err := e.eventReasons(ctx, "RayJob", tc.name)
			seen := false
			for _, ev := range evs {
				seen = seen || (ev.Type == corev1.EventTypeWarning && ev.Reason == "InvalidRayJobSpec" && strings.Contains(ev.Message, tc.want))
			}
			return j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusValidationFailed && j.Status.Message == tc.want && seen,
				fmt.Sprintf("%s: %q; event seen %v", j.Status.JobDeploymentStatus, j.Status.Message, seen), err
		})
		if out, _, err := e.in.Kubectl(e.ctx, "", "get", "rayclusters", "-n", e.ns, "-o", "name", "-l", "ray.io/originated-from-cr-name="+tc.name); err != nil || out != "" {
			t.Errorf("refused RayJob %s made a RayCluster: %q %v", tc.name, out, err)
		}
	}
}

// (MultiHostIndexing) A worker group of numOfHosts 2 and 2 replicas on raysim comes up as 4 Ray
// workers: two replicas of two hosts, each Pod labelled with its replica's name and index and its host
// index (`kubectl get pods -L` shows them), and the cluster's headless worker Service lists all four.
func testMultiHostIndexing(t *testing.T, e *rayEnv) {
	c := sampleCluster(t, "multihost")
	c.Spec.WorkerGroupSpecs[0].NumOfHosts = 2
	c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
	e.createCluster(t, c)
	_, _, workers := e.waitClusterReady(t, "multihost", 4)

	const cols = "ray.io/worker-group-replica-name,ray.io/worker-group-replica-index,ray.io/replica-host-index"
	out, stderr, err := e.in.Kubectl(e.ctx, "", "get", "pods", "-n", e.ns, "-l", "ray.io/cluster=multihost,ray.io/node-type=worker",
		"-L", cols, "--no-headers")
	must(t, "kubectl get pods -L "+cols+": "+stderr, err)
	hosts := map[string][]string{} // replica name → "index/host" of each Pod
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line) // NAME READY STATUS RESTARTS AGE, then the three labels
		if len(f) < 8 {
			t.Fatalf("kubectl get pods -L: line %q, want a replica name, index and host index at its end", line)
		}
		f = f[len(f)-3:]
		hosts[f[0]] = append(hosts[f[0]], f[1]+"/"+f[2])
	}
	var got []string
	for rn, h := range hosts {
		if !strings.HasPrefix(rn, "workergroup-") {
			t.Errorf("replica name %q, want workergroup-xxxxx", rn)
		}
		sort.Strings(h)
		got = append(got, strings.Join(h, " "))
	}
	sort.Strings(got)
	if want := []string{"0/0 0/1", "1/0 1/1"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("replicas (index/host of each Pod) %v, want %v:\n%s", got, want, out)
	}

	e.waitFor(t, time.Minute, "the headless worker Service listing the 4 workers", func(ctx context.Context) (bool, string, error) {
		svc, err := e.in.Client.CoreV1().Services(e.ns).Get(ctx, "multihost-headless", metav1.GetOptions{})
		if err != nil {
			return false, "no Service multihost-headless", err
		}
		ep, err := e.in.Client.CoreV1().Endpoints(e.ns).Get(ctx, "multihost-headless", metav1.GetOptions{})
		if err != nil {
			return false, "no Endpoints", err
		}
		ips := map[string]bool{}
		for _, s := range ep.Subsets {
			for _, a := range s.Addresses {
				ips[a.IP] = true
			}
		}
		all := svc.Spec.ClusterIP == corev1.ClusterIPNone
		for _, w := range workers {
			all = all && ips[w.Status.PodIP]
		}
		return all, fmt.Sprintf("clusterIP %q, endpoints %v", svc.Spec.ClusterIP, ips), nil
	})
}
