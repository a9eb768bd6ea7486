package defaults

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// RegisterDefaults installs the defaulting functions of this package in
// scheme for the kinds and their lists, so that scheme.Default (and the
// API server's codecs, which call it on decode) applies them.
func RegisterDefaults(scheme *runtime.Scheme) {
	withList(scheme, SetPodDefaults, func(l *corev1.PodList) []corev1.Pod { return l.Items })
	scheme.AddTypeDefaultingFunc(&corev1.PodTemplate{}, func(o any) { SetPodTemplateSpecDefaults(&o.(*corev1.PodTemplate).Template) })
	withList(scheme, SetServiceDefaults, func(l *corev1.ServiceList) []corev1.Service { return l.Items })
	withList(scheme, SetNamespaceDefaults, func(l *corev1.NamespaceList) []corev1.Namespace { return l.Items })
	withList(scheme, SetSecretDefaults, func(l *corev1.SecretList) []corev1.Secret { return l.Items })
	withList(scheme, SetNodeDefaults, func(l *corev1.NodeList) []corev1.Node { return l.Items })
	withList(scheme, SetEndpointsDefaults, func(l *corev1.EndpointsList) []corev1.Endpoints { return l.Items })
	withList(scheme, SetJobDefaults, func(l *batchv1.JobList) []batchv1.Job { return l.Items })
	withList(scheme, SetEndpointSliceDefaults, func(l *discoveryv1.EndpointSliceList) []discoveryv1.EndpointSlice { return l.Items })
	withList(scheme, SetPersistentVolumeClaimDefaults, func(l *corev1.PersistentVolumeClaimList) []corev1.PersistentVolumeClaim { return l.Items })
	withList(scheme, SetPersistentVolumeDefaults, func(l *corev1.PersistentVolumeList) []corev1.PersistentVolume { return l.Items })
	withList(scheme, SetStorageClassDefaults, func(l *storagev1.StorageClassList) []storagev1.StorageClass { return l.Items })
	withList(scheme, SetNetworkPolicyDefaults, func(l *networkingv1.NetworkPolicyList) []networkingv1.NetworkPolicy { return l.Items })
	withList(scheme, SetDeploymentDefaults, func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items })
	withList(scheme, SetReplicaSetDefaults, func(l *appsv1.ReplicaSetList) []appsv1.ReplicaSet { return l.Items })
	withList(scheme, SetStatefulSetDefaults, func(l *appsv1.StatefulSetList) []appsv1.StatefulSet { return l.Items })
	withList(scheme, SetDaemonSetDefaults, func(l *appsv1.DaemonSetList) []appsv1.DaemonSet { return l.Items })
	for _, obj := range []runtime.Object{&rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{}, &rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{}} {
		scheme.AddTypeDefaultingFunc(obj, SetRBACDefaults)
	}
}

// withList registers set as the defaulting function of the kind T and, item by item, of its list L.
func withList[T, L any, PT interface {
	*T
	runtime.Object
}, PL interface {
	*L
	runtime.Object
}](scheme *runtime.Scheme, set func(*T), items func(*L) []T) {
	scheme.AddTypeDefaultingFunc(PT(new(T)), func(o any) { set(o.(*T)) })
	scheme.AddTypeDefaultingFunc(PL(new(L)), func(o any) {
		list := items(o.(*L))
		for i := range list {
			set(&list[i])
		}
	})
}
