package defaults

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// SetNamespaceDefaults defaults a Namespace: phase Active and the
// kubernetes.io/metadata.name label set to the namespace's name.
func SetNamespaceDefaults(ns *corev1.Namespace) {
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
}

// SetSecretDefaults gives a Secret type Opaque when it has none.
func SetSecretDefaults(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

// SetNodeDefaults defaults a Node: allocatable copied from capacity when
// the node reports no allocatable resources.
func SetNodeDefaults(node *corev1.Node) {
	if len(node.Status.Allocatable) == 0 && len(node.Status.Capacity) > 0 {
		node.Status.Allocatable = make(corev1.ResourceList, len(node.Status.Capacity))
		for k, v := range node.Status.Capacity {
			node.Status.Allocatable[k] = v.DeepCopy()
		}
	}
}

// SetEndpointSliceDefaults gives every port of an EndpointSlice protocol TCP
// and an empty name when they are unset.
func SetEndpointSliceDefaults(es *discoveryv1.EndpointSlice) {
	for i := range es.Ports {
		p := &es.Ports[i]
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
		if p.Name == nil {
			empty := ""
			p.Name = &empty
		}
	}
}

// SetSubjectDefaults fills in a subject's apiGroup from its kind: "" for
// ServiceAccount, rbac.authorization.k8s.io for User and Group.
func SetSubjectDefaults(s *rbacv1.Subject) {
	if s.APIGroup != "" {
		return
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		s.APIGroup = ""
	case rbacv1.UserKind, rbacv1.GroupKind:
		s.APIGroup = rbacv1.GroupName
	}
}

// SetRoleRefDefaults gives a roleRef apiGroup rbac.authorization.k8s.io
// when it has none.
func SetRoleRefDefaults(r *rbacv1.RoleRef) {
	if r.APIGroup == "" {
		r.APIGroup = rbacv1.GroupName
	}
}

// SetRoleBindingDefaults defaults a RoleBinding's roleRef and subjects.
func SetRoleBindingDefaults(rb *rbacv1.RoleBinding) {
	SetRoleRefDefaults(&rb.RoleRef)
	for i := range rb.Subjects {
		SetSubjectDefaults(&rb.Subjects[i])
	}
}

// SetClusterRoleBindingDefaults defaults a ClusterRoleBinding's roleRef and
// subjects.
func SetClusterRoleBindingDefaults(crb *rbacv1.ClusterRoleBinding) {
	SetRoleRefDefaults(&crb.RoleRef)
	for i := range crb.Subjects {
		SetSubjectDefaults(&crb.Subjects[i])
	}
}

// SetRBACDefaults defaults any RBAC object it is given (RoleBinding,
// ClusterRoleBinding or their lists); other objects are left alone.
func SetRBACDefaults(obj any) {
	switch o := obj.(type) {
	case *rbacv1.RoleBinding:
		SetRoleBindingDefaults(o)
	case *rbacv1.ClusterRoleBinding:
		SetClusterRoleBindingDefaults(o)
	case *rbacv1.RoleBindingList:
		for i := range o.Items {
			SetRoleBindingDefaults(&o.Items[i])
		}
	case *rbacv1.ClusterRoleBindingList:
		for i := range o.Items {
			SetClusterRoleBindingDefaults(&o.Items[i])
		}
	}
}
