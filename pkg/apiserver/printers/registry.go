package printers

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
)

// ForKind returns the table convertor for a built-in kind, e.g.
// schema.GroupKind{Kind: "Pod"} or {Group: "events.k8s.io", Kind: "Event"},
// or nil when this package has none for it.
func ForKind(gk schema.GroupKind) rest.TableConvertor {
	switch gk {
	case schema.GroupKind{Kind: "Pod"}:
		return NewPodTableConvertor()
	case schema.GroupKind{Kind: "Service"}:
		return NewServiceTableConvertor()
	case schema.GroupKind{Kind: "Node"}:
		return NewNodeTableConvertor()
	case schema.GroupKind{Kind: "Namespace"}:
		return NewNamespaceTableConvertor()
	case schema.GroupKind{Kind: "ConfigMap"}:
		return NewConfigMapTableConvertor()
	case schema.GroupKind{Kind: "Secret"}:
		return NewSecretTableConvertor()
	case schema.GroupKind{Kind: "ServiceAccount"}:
		return NewServiceAccountTableConvertor()
	case schema.GroupKind{Kind: "Event"}:
		return NewEventTableConvertor()
	case schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}:
		return NewEventsV1TableConvertor()
	case schema.GroupKind{Kind: "Endpoints"}:
		return NewEndpointsTableConvertor()
	case schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:
		return NewEndpointSliceTableConvertor()
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		return NewJobTableConvertor()
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		return NewDeploymentTableConvertor()
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		return NewReplicaSetTableConvertor()
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return NewStatefulSetTableConvertor()
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		return NewDaemonSetTableConvertor()
	case schema.GroupKind{Group: "apps", Kind: "ControllerRevision"}:
		return NewControllerRevisionTableConvertor()
	case schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}:
		return NewLeaseTableConvertor()
	case schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"}:
		return NewRoleTableConvertor()
	case schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:
		return NewClusterRoleTableConvertor()
	case schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:
		return NewRoleBindingTableConvertor()
	case schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:
		return NewClusterRoleBindingTableConvertor()
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		return NewPersistentVolumeClaimTableConvertor()
	case schema.GroupKind{Kind: "PersistentVolume"}:
		return NewPersistentVolumeTableConvertor()
	case schema.GroupKind{Group: "storage.k8s.io", Kind: "StorageClass"}:
		return NewStorageClassTableConvertor()
	case schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}:
		return NewIngressTableConvertor()
	case schema.GroupKind{Group: "networking.k8s.io", Kind: "IngressClass"}:
		return NewIngressClassTableConvertor()
	case schema.GroupKind{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:
		return NewNetworkPolicyTableConvertor()
	case schema.GroupKind{Group: "node.k8s.io", Kind: "RuntimeClass"}:
		return NewRuntimeClassTableConvertor()
	}
	return nil
}
