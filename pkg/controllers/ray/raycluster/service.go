package raycluster

import (
	"sort"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// HeadService returns the head Service KubeRay would create for c, `<cluster>-head-svc`.
//
// As in KubeRay v1.5 (unless its ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE is set), a ClusterIP head Service
// is headless (clusterIP None) and publishes not-ready addresses: a cluster has at most one head, so
// a virtual IP buys nothing, and workers must reach the GCS before the head passes its readiness probe.
// Its ports are the head container's named ports (client, gcs-server, dashboard, metrics, serve by
// default), with appProtocol tcp, sorted by name. A user-provided spec.headGroupSpec.headService is
// the starting point if set; the selector is always KubeRay's.
func HeadService(c *rayv1.RayCluster) *corev1.Service {
	sel := headServiceLabels(c.Name)
	// Template labels may override the selector's values (KubeRay: only app.kubernetes.io/name).
	if v, ok := c.Spec.HeadGroupSpec.Template.Labels[rayparams.LabelAppName]; ok {
		sel[rayparams.LabelAppName] = v
	}
	ann := map[string]string{}
	for k, v := range c.Spec.HeadServiceAnnotations {
		ann[k] = v
	}
	var ports []corev1.ServicePort
	for name, port := range rayparams.HeadServicePorts(&c.Spec) {
		ports = append(ports, corev1.ServicePort{Name: name, Port: port, AppProtocol: ptr.To("tcp")})
	}
	sort.SliceStable(ports, func(i, j int) bool { return ports[i].Name < ports[j].Name })

	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: rayparams.HeadServiceName(c), Namespace: c.Namespace},
	}
	if hs := c.Spec.HeadGroupSpec.HeadService; hs != nil {
		svc.ObjectMeta = *hs.ObjectMeta.DeepCopy()
		svc.Spec = *hs.Spec.DeepCopy()
		svc.Name, svc.Namespace = rayparams.HeadServiceName(c), c.Namespace
		svc.Spec.Ports = append(svc.Spec.Ports, ports...)
		if svc.Spec.Type == "" {
			svc.Spec.Type = c.Spec.HeadGroupSpec.ServiceType
		}
	} else {
		svc.Spec = corev1.ServiceSpec{Ports: ports, Type: c.Spec.HeadGroupSpec.ServiceType}
		if svc.Spec.Type == "" || svc.Spec.Type == corev1.ServiceTypeClusterIP {
			svc.Spec.ClusterIP = corev1.ClusterIPNone
			svc.Spec.PublishNotReadyAddresses = true
		}
	}
	svc.Spec.Selector = sel
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	for k, v := range sel {
		svc.Labels[k] = v
	}
	if svc.Annotations == nil && len(ann) > 0 {
		svc.Annotations = map[string]string{}
	}
	for k, v := range ann {
		svc.Annotations[k] = v
	}
	svc.OwnerReferences = []metav1.OwnerReference{ownerRef(c)}
	return svc
}
