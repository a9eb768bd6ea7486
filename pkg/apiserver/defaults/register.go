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
	add := func(obj runtime.Object, fn func(any)) { scheme.AddTypeDefaultingFunc(obj, fn) }

	add(&corev1.Pod{}, func(o any) { SetPodDefaults(o.(*corev1.Pod)) })
	add(&corev1.PodList{}, func(o any) {
		for i := range o.(*corev1.PodList).Items {
			SetPodDefaults(&o.(*corev1.PodList).Items[i])
		}
	})
	add(&corev1.PodTemplate{}, func(o any) { SetPodTemplateSpecDefaults(&o.(*corev1.PodTemplate).Template) })
	add(&corev1.Service{}, func(o any) { SetServiceDefaults(o.(*corev1.Service)) })
	add(&corev1.ServiceList{}, func(o any) {
		for i := range o.(*corev1.ServiceList).Items {
			SetServiceDefaults(&o.(*corev1.ServiceList).Items[i])
		}
	})
	add(&corev1.Namespace{}, func(o any) { SetNamespaceDefaults(o.(*corev1.Namespace)) })
	add(&corev1.NamespaceList{}, func(o any) {
		for i := range o.(*corev1.NamespaceList).Items {
			SetNamespaceDefaults(&o.(*corev1.NamespaceList).Items[i])
		}
	})
	add(&corev1.Secret{}, func(o any) { SetSecretDefaults(o.(*corev1.Secret)) })
	add(&corev1.SecretList{}, func(o any) {
		for i := range o.(*corev1.SecretList).Items {
			SetSecretDefaults(&o.(*corev1.SecretList).Items[i])
		}
	})
	add(&corev1.Node{}, func(o any) { SetNodeDefaults(o.(*corev1.Node)) })
	add(&corev1.NodeList{}, func(o any) {
		for i := range o.(*corev1.NodeList).Items {
			SetNodeDefaults(&o.(*corev1.NodeList).Items[i])
		}
	})
	add(&corev1.Endpoints{}, func(o any) { SetEndpointsDefaults(o.(*corev1.Endpoints)) })
	add(&corev1.EndpointsList{}, func(o any) {
		for i := range o.(*corev1.EndpointsList).Items {
			SetEndpointsDefaults(&o.(*corev1.EndpointsList).Items[i])
		}
	})
	add(&batchv1.Job{}, func(o any) { SetJobDefaults(o.(*batchv1.Job)) })
	add(&batchv1.JobList{}, func(o any) {
		for i := range o.(*batchv1.JobList).Items {
			SetJobDefaults(&o.(*batchv1.JobList).Items[i])
		}
	})
	add(&discoveryv1.EndpointSlice{}, func(o any) { SetEndpointSliceDefaults(o.(*discoveryv1.EndpointSlice)) })
	add(&discoveryv1.EndpointSliceList{}, func(o any) {
		for i := range o.(*discoveryv1.EndpointSliceList).Items {
			SetEndpointSliceDefaults(&o.(*discoveryv1.EndpointSliceList).Items[i])
		}
	})
	add(&corev1.PersistentVolumeClaim{}, func(o any) { SetPersistentVolumeClaimDefaults(o.(*corev1.PersistentVolumeClaim)) })
	add(&corev1.PersistentVolumeClaimList{}, func(o any) {
		for i := range o.(*corev1.PersistentVolumeClaimList).Items {
			SetPersistentVolumeClaimDefaults(&o.(*corev1.PersistentVolumeClaimList).Items[i])
		}
	})
	add(&corev1.PersistentVolume{}, func(o any) { SetPersistentVolumeDefaults(o.(*corev1.PersistentVolume)) })
	add(&corev1.PersistentVolumeList{}, func(o any) {
		for i := range o.(*corev1.PersistentVolumeList).Items {
			SetPersistentVolumeDefaults(&o.(*corev1.PersistentVolumeList).Items[i])
		}
	})
	add(&storagev1.StorageClass{}, func(o any) { SetStorageClassDefaults(o.(*storagev1.StorageClass)) })
	add(&storagev1.StorageClassList{}, func(o any) {
		for i := range o.(*storagev1.StorageClassList).Items {
			SetStorageClassDefaults(&o.(*storagev1.StorageClassList).Items[i])
		}
	})
	add(&networkingv1.NetworkPolicy{}, func(o any) { SetNetworkPolicyDefaults(o.(*networkingv1.NetworkPolicy)) })
	add(&networkingv1.NetworkPolicyList{}, func(o any) {
		for i := range o.(*networkingv1.NetworkPolicyList).Items {
			SetNetworkPolicyDefaults(&o.(*networkingv1.NetworkPolicyList).Items[i])
		}
	})
	add(&appsv1.Deployment{}, func(o any) { SetDeploymentDefaults(o.(*appsv1.Deployment)) })
	add(&appsv1.DeploymentList{}, func(o any) {
		for i := range o.(*appsv1.DeploymentList).Items {
			SetDeploymentDefaults(&o.(*appsv1.DeploymentList).Items[i])
		}
	})
	add(&appsv1.ReplicaSet{}, func(o any) { SetReplicaSetDefaults(o.(*appsv1.ReplicaSet)) })
	add(&appsv1.ReplicaSetList{}, func(o any) {
		for i := range o.(*appsv1.ReplicaSetList).Items {
			SetReplicaSetDefaults(&o.(*appsv1.ReplicaSetList).Items[i])
		}
	})
	add(&appsv1.StatefulSet{}, func(o any) { SetStatefulSetDefaults(o.(*appsv1.StatefulSet)) })
	add(&appsv1.StatefulSetList{}, func(o any) {
		for i := range o.(*appsv1.StatefulSetList).Items {
			SetStatefulSetDefaults(&o.(*appsv1.StatefulSetList).Items[i])
		}
	})
	add(&appsv1.DaemonSet{}, func(o any) { SetDaemonSetDefaults(o.(*appsv1.DaemonSet)) })
	add(&appsv1.DaemonSetList{}, func(o any) {
		for i := range o.(*appsv1.DaemonSetList).Items {
			SetDaemonSetDefaults(&o.(*appsv1.DaemonSetList).Items[i])
		}
	})
	for _, obj := range []runtime.Object{&rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{}, &rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{}} {
		add(obj, SetRBACDefaults)
	}
}
