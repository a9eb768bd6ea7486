package raycluster

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster/expectations"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// Multi-host worker groups, as KubeRay v1.7 runs them with RayMultiHostIndexing on (its default): a
// group of numOfHosts > 1 is a number of replicas, each numOfHosts Pods (say the hosts of one TPU
// slice) that come and go together. A replica is created whole, with a fresh name and the lowest free
// index; a replica that lost a Pod (deleted, or one that cannot run again) is deleted whole and made
// anew; scaling down and scaleStrategy.workersToDelete remove whole replicas. The cluster gets a
// headless Service over its workers, `<cluster>-headless`, for the hosts of a replica to find each
// other.

// freeIndices returns a function that hands out the replica indices pods do not hold, lowest first.
func freeIndices(pods []corev1.Pod) func() int {
	used := map[int]bool{}
	for i := range pods {
		if n, err := strconv.Atoi(pods[i].Labels[rayparams.LabelReplicaIndex]); err == nil {
			used[n] = true
		}
	}
	next := 0
	return func() int {
		for used[next] {
			next++
		}
		used[next] = true
		return next
	}
}

// replica is the live (not terminating) Pods of one replica of a multi-host group, by host index.
type replica struct {
	name  string
	index int
	pods  []*corev1.Pod
	ready bool // every Pod Running and Ready
}

// reconcileReplicas brings a multi-host group to its desired number of whole replicas. Each pass
// takes at most one kind of step and ends there when it deleted anything, so creations wait until
// the cache has seen the deletions (expectations).
func (r *reconciler) reconcileReplicas(ctx context.Context, c *rayv1.RayCluster, g *rayv1.WorkerGroupSpec, pods []corev1.Pod) error {
	key := group(c, g.GroupName)
	hosts := int(numOfHosts(g))
	byName := map[string]*replica{}
	var broken []*corev1.Pod // Pods of no replica, or of one short of a host
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		name := p.Labels[rayparams.LabelReplicaName]
		if name == "" {
			broken = append(broken, p) // made before multi-host indexing, or by hand
			continue
		}
		rp := byName[name]
		if rp == nil {
			idx, _ := strconv.Atoi(p.Labels[rayparams.LabelReplicaIndex])
			rp = &replica{name: name, index: idx, ready: true}
			byName[name] = rp
		}
		rp.pods = append(rp.pods, p)
		rp.ready = rp.ready && isRunningAndReady(p)
	}
	replicas := make([]*replica, 0, len(byName))
	for _, rp := range byName {
		if len(rp.pods) != hosts {
			broken = append(broken, rp.pods...)
			continue
		}
		replicas = append(replicas, rp)
	}
	if len(broken) > 0 {
		for _, p := range broken {
			if err := r.deleteWorker(ctx, c, key, p, fmt.Sprintf("its replica %q does not have all its %d hosts", p.Labels[rayparams.LabelReplicaName], hosts)); err != nil {
				return err
			}
		}
		return fmt.Errorf("deleted %d worker Pods of incomplete replicas of group %s", len(broken), g.GroupName)
	}

	// A Pod that cannot run again, or one the autoscaler names, takes its whole replica with it.
	toDelete := map[string]bool{}
	for _, n := range g.ScaleStrategy.WorkersToDelete {
		toDelete[n] = true
	}
	deleted := 0
	var kept []*replica
	for _, rp := range replicas {
		why := ""
		for _, p := range rp.pods {
			if del, reason := shouldDelete(p, rayv1.WorkerNode); del {
				why = reason
			} else if toDelete[p.Name] && why == "" {
				why = "named in scaleStrategy.workersToDelete"
			}
		}
		if why == "" {
			kept = append(kept, rp)
			continue
		}
		if err := r.deleteReplica(ctx, c, key, rp, why); err != nil {
			return err
		}
		deleted++
	}
	if deleted > 0 {
		return fmt.Errorf("deleted %d replicas of group %s", deleted, g.GroupName)
	}

	want := int(DesiredWorkers(g)) / hosts
	switch diff := want - len(kept); {
	case diff > 0:
		var all []corev1.Pod
		for _, rp := range kept {
			all = append(all, *rp.pods[0])
		}
		free := freeIndices(all)
		for range diff {
			slot := ReplicaSlot{Index: free(), Name: rayparams.CheckLabel(g.GroupName + "-" + rand.String(5))}
			for slot.Host = 0; slot.Host < hosts; slot.Host++ {
				if err := r.createWorker(ctx, c, g, slot); err != nil {
					return err
				}
			}
		}
	case diff < 0:
		if AutoscalingEnabled(c) {
			return nil // with the autoscaler on, only it picks what to remove (workersToDelete)
		}
		// Replicas not fully ready go first (they carry no work), then the highest indices.
		sort.Slice(kept, func(i, j int) bool {
			if kept[i].ready != kept[j].ready {
				return !kept[i].ready
			}
			return kept[i].index > kept[j].index
		})
		for _, rp := range kept[:-diff] {
			if err := r.deleteReplica(ctx, c, key, rp, "scaling down"); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteReplica deletes every Pod of a replica.
func (r *reconciler) deleteReplica(ctx context.Context, c *rayv1.RayCluster, key expectations.Group, rp *replica, why string) error {
	for _, p := range rp.pods {
		if err := r.deleteWorker(ctx, c, key, p, fmt.Sprintf("replica %s goes whole: %s", rp.name, why)); err != nil {
			return err
		}
	}
	return nil
}

// multiHost reports whether c has a worker group of numOfHosts > 1.
func multiHost(c *rayv1.RayCluster) bool {
	for i := range c.Spec.WorkerGroupSpecs {
		if numOfHosts(&c.Spec.WorkerGroupSpecs[i]) > 1 {
			return true
		}
	}
	return false
}

// HeadlessWorkerServiceName is the name of c's headless worker Service.
func HeadlessWorkerServiceName(c *rayv1.RayCluster) string { return c.Name + "-headless" }

// HeadlessWorkerService is the Service KubeRay makes for a cluster with a multi-host group: headless,
// over every worker Pod of the cluster, publishing Pods before they are ready (the hosts of a replica
// find each other while they start), owned by the cluster.
func HeadlessWorkerService(c *rayv1.RayCluster) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: HeadlessWorkerServiceName(c), Namespace: c.Namespace,
			Labels:          map[string]string{rayparams.LabelHeadlessWorkerService: c.Name},
			OwnerReferences: []metav1.OwnerReference{ownerRef(c)},
		},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.WorkerNode)},
			PublishNotReadyAddresses: true,
		},
	}
}

// reconcileHeadlessWorkerService makes the headless worker Service once c has a multi-host group. As
// in KubeRay, it stays if the group goes (its owner reference removes it with the cluster).
func (r *reconciler) reconcileHeadlessWorkerService(ctx context.Context, c *rayv1.RayCluster) error {
	if !multiHost(c) {
		return nil
	}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: HeadlessWorkerServiceName(c)}, &corev1.Service{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	return r.createService(ctx, c, HeadlessWorkerService(c))
}
