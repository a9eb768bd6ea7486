package raycluster

import (
	"context"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/rayports"
)

// Where the node's pods share the host's network (ctrlset.Env.HostNetworkPods), every Ray pod gets a
// block of the host's loopback ports (rayports). A cluster's head keeps one block for the cluster's
// life, which its head Service records (rayports.Annotation) and points its target ports at; each
// worker takes a block of its own, which its Pod records. Blocks in use are those the cache's Ray Pods
// and Services record, and those this controller handed out moments ago (the cache catches up).

// headKey names a cluster in the allocator's memory of head blocks.
func headKey(c *rayv1.RayCluster) string { return c.Namespace + "/" + c.Name }

// headBlock returns c's head block: the one its head Service (svc, nil if none yet) records, else the
// one this controller gave it, else a new one.
func (r *reconciler) headBlock(ctx context.Context, c *rayv1.RayCluster, svc *corev1.Service) (rayports.Block, error) {
	var recorded *rayports.Block
	if svc != nil {
		if b, ok := rayports.FromAnnotations(svc.Annotations); ok {
			recorded = &b
		}
	}
	return r.ports.Head(headKey(c), recorded, func() (map[rayports.Block]bool, error) { return r.blocksInUse(ctx) })
}

// blocksInUse are the blocks the cache's Pods and Services record.
func (r *reconciler) blocksInUse(ctx context.Context) (map[rayports.Block]bool, error) {
	used := map[rayports.Block]bool{}
	for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}} {
		if err := r.client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		err := meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(metav1.Object); ok {
				if b, ok := rayports.FromAnnotations(obj.GetAnnotations()); ok {
					used[b] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return used, nil
}

// headPlan is the port plan of c's head Pod (nil where pods have networks of their own).
func (r *reconciler) headPlan(ctx context.Context, c *rayv1.RayCluster) (*PortPlan, error) {
	if r.ports == nil {
		return nil, nil
	}
	svc, err := r.headService(ctx, c)
	if err != nil {
		return nil, err
	}
	head, err := r.headBlock(ctx, c, svc)
	if err != nil {
		return nil, err
	}
	return &PortPlan{Own: head, Head: head}, nil
}

// workerPlan is the port plan of a new worker Pod of c: a block of its own, joining the head's.
func (r *reconciler) workerPlan(ctx context.Context, c *rayv1.RayCluster) (*PortPlan, error) {
	plan, err := r.headPlan(ctx, c)
	if plan == nil || err != nil {
		return plan, err
	}
	used, err := r.blocksInUse(ctx)
	if err != nil {
		return nil, err
	}
	used[plan.Head] = true
	own, err := r.ports.Take(used)
	if err != nil {
		return nil, err
	}
	plan.Own = own
	return plan, nil
}

// placeServicePorts points the head Service's ports at the head's block (the ports its Pod's Ray
// listens on), keeping the Service's own port numbers, and records the block. A headless Service gets
// a cluster IP instead (as KubeRay's ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE does): kubectl port-forward
// takes a headless Service's port for the Pod's, and only reads the target port of one with an IP.
func placeServicePorts(svc *corev1.Service, c *rayv1.RayCluster, head rayports.Block) {
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		svc.Spec.ClusterIP = ""
	}
	roles := portRoles(c.Spec.HeadGroupSpec.RayStartParams)
	for i := range svc.Spec.Ports {
		if role, ok := roles[svc.Spec.Ports[i].Port]; ok {
			svc.Spec.Ports[i].TargetPort = intstr.FromInt32(head.Port(role))
		}
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[rayports.Annotation] = head.String()
}
