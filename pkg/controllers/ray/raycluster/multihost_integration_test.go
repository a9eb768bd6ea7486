package raycluster_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/rayparams"
)

// replicasOf groups the live worker Pods of group g by replica name, each replica described as
// "index:host,host" (hosts sorted); a Pod without a replica name is one of its own, "index:".
func replicasOf(ctx context.Context, t *testing.T, ns, g string) map[string]string {
	t.Helper()
	hosts := map[string][]string{}
	index := map[string]string{}
	for _, p := range pods(ctx, t, ns, client.MatchingLabels{"ray.io/group": g}) {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		name := p.Labels[rayparams.LabelReplicaName]
		if name == "" {
			name = "pod/" + p.Name
		}
		hosts[name] = append(hosts[name], p.Labels[rayparams.LabelHostIndex])
		if prev, ok := index[name]; ok && prev != p.Labels[rayparams.LabelReplicaIndex] {
			index[name] = "mixed"
		} else {
			index[name] = p.Labels[rayparams.LabelReplicaIndex]
		}
	}
	out := map[string]string{}
	for name, h := range hosts {
		sort.Strings(h)
		out[name] = index[name] + ":" + strings.Join(h, ",")
	}
	return out
}

// indices is the sorted list of the replicas' descriptions (their names left out).
func indices(replicas map[string]string) string {
	var d []string
	for _, v := range replicas {
		d = append(d, v)
	}
	sort.Strings(d)
	return strings.Join(d, " ")
}

// TestMultiHostReplicas: KubeRay v1.7's multi-host indexing. A group of numOfHosts 2 is made of whole
// replicas, each two Pods sharing a replica name (`<group>-xxxxx`) and index, with host indices 0 and 1;
// a single-host group's Pods carry their replica index alone; the cluster gets its headless worker
// Service. A replica that loses a Pod is replaced whole under its old index; scaling down and
// workersToDelete take whole replicas.
func TestMultiHostReplicas(t *testing.T) {
	ctx, ns := setup(t)
	c := sample(t, ns, 2)
	multi := c.Spec.WorkerGroupSpecs[0].DeepCopy()
	multi.GroupName, multi.NumOfHosts, multi.MinReplicas = "multi", 2, ptr.To[int32](0)
	c.Spec.WorkerGroupSpecs = append(c.Spec.WorkerGroupSpecs, *multi)
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	name := c.Name
	desc := func() string {
		return fmt.Sprintf("multi: %v\nsingle: %v\n%s", replicasOf(ctx, t, ns, "multi"), replicasOf(ctx, t, ns, "workergroup"), describe(ctx, t, ns, name)())
	}
	want := func(what, g, replicas string) map[string]string {
		t.Helper()
		var got map[string]string
		eventually(ctx, t, what, func() bool {
			got = replicasOf(ctx, t, ns, g)
			return indices(got) == replicas
		}, desc)
		return got
	}

	first := want("two replicas of two hosts", "multi", "0:0,1 1:0,1")
	for rn := range first {
		if !strings.HasPrefix(rn, "multi-") || len(rn) != len("multi-")+5 {
			t.Errorf("replica name %q, want multi-xxxxx", rn)
		}
	}
	want("single-host workers with indices 0 and 1", "workergroup", "0: 1:")

	svc := &corev1.Service{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-headless"}, svc); err != nil {
		t.Fatalf("the headless worker Service: %v", err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses ||
		svc.Spec.Selector["ray.io/cluster"] != name || svc.Spec.Selector["ray.io/node-type"] != "worker" ||
		svc.Labels[rayparams.LabelHeadlessWorkerService] != name {
		t.Errorf("headless worker Service: labels %v spec %+v", svc.Labels, svc.Spec)
	}
	runPods(ctx, t, ns)

	// One host of replica 0 deleted: its sibling goes too, and a new replica 0 comes whole.
	var lost string
	for rn, d := range first {
		if strings.HasPrefix(d, "0:") {
			lost = rn
		}
	}
	host := pods(ctx, t, ns, client.MatchingLabels{rayparams.LabelReplicaName: lost, rayparams.LabelHostIndex: "1"})
	if len(host) != 1 {
		t.Fatalf("replica %s host 1: %d Pods", lost, len(host))
	}
	if err := cl.Delete(ctx, &host[0]); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "replica "+lost+" replaced by a new replica 0", func() bool {
		got := replicasOf(ctx, t, ns, "multi")
		_, old := got[lost]
		return !old && indices(got) == "0:0,1 1:0,1"
	}, desc)
	runPods(ctx, t, ns)

	// Scaling to one replica removes one whole replica.
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[1].Replicas = ptr.To[int32](1) })
	left := want("one replica left", "multi", "0:0,1")

	// The autoscaler's way down: naming one host removes its whole replica.
	var rn string
	for n := range left {
		rn = n
	}
	named := pods(ctx, t, ns, client.MatchingLabels{rayparams.LabelReplicaName: rn, rayparams.LabelHostIndex: "0"})[0].Name
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[1].Replicas = ptr.To[int32](0)
		c.Spec.WorkerGroupSpecs[1].ScaleStrategy.WorkersToDelete = []string{named}
	})
	want("no replica left", "multi", "")
	want("the single-host group untouched", "workergroup", "0: 1:")
}
