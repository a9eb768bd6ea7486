package rayservice

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// headService is the RayService's head Service: the cluster's own head Service (ports, type),
// renamed after the RayService, so that it stays put while the cluster behind it changes.
func headService(rs *rayv1.RayService, cluster *rayv1.RayCluster) *corev1.Service {
	svc := raycluster.HeadService(cluster)
	// KubeRay's labels: the origin, the node type and the RayService's own identifier, never the
	// cluster's name, which would make it a second head Service of that cluster.
	labels := originLabels(rs)
	labels[rayparams.LabelNodeType] = string(rayv1.HeadNode)
	labels[rayparams.LabelIdentifier] = rayparams.CheckLabel(rs.Name + "-" + string(rayv1.HeadNode))
	svc.ObjectMeta = metav1.ObjectMeta{Name: rayparams.OwnedHeadServiceName(rs.Name), Namespace: rs.Namespace, Labels: labels, Annotations: svc.Annotations}
	return svc
}

// serveService is the RayService's serve Service: the head container's "serve" ports (or "serve-*"),
// selecting the cluster's Pods labelled ray.io/serve=true. spec.serveService, when given, supplies
// the rest (name, labels, annotations, type, its own ports); its selector is replaced.
func serveService(rs *rayv1.RayService, cluster *rayv1.RayCluster) *corev1.Service {
	var ports []corev1.ServicePort
	if cs := cluster.Spec.HeadGroupSpec.Template.Spec.Containers; len(cs) > 0 {
		for _, p := range cs[0].Ports {
			if p.Name == rayparams.ServingPortName || len(p.Name) > len(rayparams.ServingPortName)+1 && p.Name[:len(rayparams.ServingPortName)+1] == rayparams.ServingPortName+"-" {
				ports = append(ports, corev1.ServicePort{Name: p.Name, Port: p.ContainerPort})
			}
		}
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: serveServiceName(rs), Namespace: rs.Namespace},
		Spec:       corev1.ServiceSpec{Type: rs.Spec.RayClusterSpec.HeadGroupSpec.ServiceType},
	}
	if user := rs.Spec.ServeService; user != nil {
		svc.ObjectMeta = *user.ObjectMeta.DeepCopy()
		svc.Name, svc.Namespace = serveServiceName(rs), rs.Namespace
		svc.Spec = *user.Spec.DeepCopy()
		have := map[string]bool{}
		for _, p := range svc.Spec.Ports {
			have[p.Name] = true
		}
		for _, p := range ports {
			if !have[p.Name] {
				svc.Spec.Ports = append(svc.Spec.Ports, p)
			}
		}
	} else {
		svc.Spec.Ports = ports
	}
	if len(svc.Spec.Ports) == 0 {
		svc.Spec.Ports = []corev1.ServicePort{{Name: rayparams.ServingPortName, Port: rayparams.DefaultServingPort}}
	}
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	maps.Copy(svc.Labels, originLabels(rs))
	svc.Labels[rayparams.LabelServe] = rs.Name + "-serve"
	svc.Spec.Selector = map[string]string{rayparams.LabelCluster: cluster.Name, rayparams.LabelServe: "true"}
	return svc
}
