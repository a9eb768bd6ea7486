package admission

import (
	"context"
	"fmt"
	"maps"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/admission"

	nodeauth "github.com/rayctl/rayctl/pkg/apiserver/auth/node"
)

var (
	podsResource            = corev1.Resource("pods")
	serviceAccountsResource = corev1.Resource("serviceaccounts")
	nodesResource           = corev1.Resource("nodes")
	leasesResource          = coordinationv1.Resource("leases")
)

// nodeRestriction is a validating admission plugin that keeps a kubelet to its own node, as Kubernetes'
// NodeRestriction plugin does: RBAC grants every node the same rights (system:node), and this plugin
// narrows the writes to the node's own objects. A node may change only its own Node (and nodes/status),
// its own Lease in kube-node-lease, the status of pods bound to it, and create or delete only pods bound
// to it; it may not update pods, nor use their other subresources. The tokens it requests
// (serviceaccounts/token) must be bound to a pod bound to it. Events and reads are left to RBAC.
// Requests from anyone else pass untouched.
type nodeRestriction struct {
	*admission.Handler
	// pod reads a pod as stored (nil: a node's token requests are refused).
	pod func(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// cached, when set, looks a pod up in a cache first (nil when it holds none): a token request for a
	// pod the cache shows bound to the node, with the UID asked for, needs no read through the API.
	cached func(namespace, name string) *corev1.Pod
}

var _ admission.ValidationInterface = &nodeRestriction{}

// newNodeRestriction returns the plugin; pod reads the pods that nodes' token requests are bound to.
func newNodeRestriction(pod func(ctx context.Context, namespace, name string) (*corev1.Pod, error)) *nodeRestriction {
	return &nodeRestriction{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete), pod: pod}
}

// Validate refuses a node's write to anything that is not its own.
func (p *nodeRestriction) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	node, isNode := nodeauth.Identity(a.GetUserInfo())
	if !isNode {
		return nil
	}
	if node == "" {
		return admission.NewForbidden(a, fmt.Errorf("could not tell which node user %q (in group %s) is: want %s<node name>",
			a.GetUserInfo().GetName(), nodeauth.Group, nodeauth.UserPrefix))
	}
	switch a.GetResource().GroupResource() {
	case podsResource:
		return p.admitPod(node, a)
	case nodesResource:
		return p.admitNode(node, a)
	case leasesResource:
		return p.admitLease(node, a)
	case serviceAccountsResource:
		if a.GetSubresource() == "token" {
			return p.admitTokenRequest(ctx, node, a)
		}
	}
	return nil
}

// admitTokenRequest lets a node ask only for tokens bound to a pod bound to it.
func (p *nodeRestriction) admitTokenRequest(ctx context.Context, node string, a admission.Attributes) error {
	req, ok := a.GetObject().(*authenticationv1.TokenRequest)
	if !ok {
		return admission.NewForbidden(a, fmt.Errorf("unexpected object %T for a token request", a.GetObject()))
	}
	ref := req.Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only request tokens bound to a pod", node))
	}
	if p.cached != nil {
		if pod := p.cached(a.GetNamespace(), ref.Name); pod != nil && pod.Spec.NodeName == node && ref.UID != "" && pod.UID == ref.UID {
			return nil
		}
	}
	if p.pod == nil {
		return admission.NewForbidden(a, fmt.Errorf("node %q: cannot look the pod up", node))
	}
	pod, err := p.pod(ctx, a.GetNamespace(), ref.Name)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("node %q: reading pod %s/%s: %w", node, a.GetNamespace(), ref.Name, err))
	}
	if pod.Spec.NodeName != node {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only request tokens bound to its own pods, and pod %s/%s is %s", node, a.GetNamespace(), ref.Name, boundTo(pod)))
	}
	return nil
}

// admitPod lets a node create and delete pods bound to it and write the status of those; nothing more.
func (p *nodeRestriction) admitPod(node string, a admission.Attributes) error {
	switch a.GetSubresource() {
	case "":
		switch a.GetOperation() {
		case admission.Create:
			pod, ok := a.GetObject().(*corev1.Pod)
			if !ok {
				return admission.NewForbidden(a, fmt.Errorf("unexpected object %T for a pod", a.GetObject()))
			}
			if pod.Spec.NodeName != node {
				return admission.NewForbidden(a, fmt.Errorf("node %q can only create pods with spec.nodeName set to itself, not %q", node, pod.Spec.NodeName))
			}
			return admitMirrorPod(node, pod, a)
		case admission.Delete:
			old, err := oldPod(a)
			if err != nil {
				return err
			}
			if old.Spec.NodeName != node {
				return admission.NewForbidden(a, fmt.Errorf("node %q can only delete pods with spec.nodeName set to itself, not %s", node, boundTo(old)))
			}
			return nil
		}
		return admission.NewForbidden(a, fmt.Errorf("node %q can only create and delete pods bound to it, and write their status, not %s them",
			node, strings.ToLower(string(a.GetOperation()))))
	case "status":
		if a.GetOperation() != admission.Update {
			return admission.NewForbidden(a, fmt.Errorf("node %q can only update pod status, not %s it", node, strings.ToLower(string(a.GetOperation()))))
		}
		old, err := oldPod(a)
		if err != nil {
			return err
		}
		if old.Spec.NodeName != node {
			return admission.NewForbidden(a, fmt.Errorf("node %q can only update the status of pods with spec.nodeName set to itself, not of a pod %s", node, boundTo(old)))
		}
		pod, ok := a.GetObject().(*corev1.Pod)
		if !ok {
			return admission.NewForbidden(a, fmt.Errorf("unexpected object %T for a pod", a.GetObject()))
		}
		// The status endpoint keeps the spec but takes the metadata it is sent.
		if !maps.Equal(old.Labels, pod.Labels) {
			return admission.NewForbidden(a, fmt.Errorf("node %q cannot update labels through pod status", node))
		}
		return nil
	}
	return admission.NewForbidden(a, fmt.Errorf("node %q may not use pods/%s", node, a.GetSubresource()))
}

// admitMirrorPod lets a node create a pod only as the mirror of a static pod it runs, as Kubernetes
// does: annotated kubernetes.io/config.mirror, and using no Secret, ConfigMap, claim or service account
// other than the default (a mirror pod is a report, not a way for a node to reach more than its pods).
func admitMirrorPod(node string, pod *corev1.Pod, a admission.Attributes) error {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only create mirror pods (annotated %s), and this pod is not one", node, corev1.MirrorPodAnnotationKey))
	}
	if sa := pod.Spec.ServiceAccountName; sa != "" && sa != "default" {
		return admission.NewForbidden(a, fmt.Errorf("node %q cannot create a mirror pod that uses service account %q", node, sa))
	}
	if s := nodeauth.Secrets(pod); len(s) > 0 {
		return admission.NewForbidden(a, fmt.Errorf("node %q cannot create a mirror pod that uses secret %q", node, s[0]))
	}
	if c := nodeauth.ConfigMaps(pod); len(c) > 0 {
		return admission.NewForbidden(a, fmt.Errorf("node %q cannot create a mirror pod that uses config map %q", node, c[0]))
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return admission.NewForbidden(a, fmt.Errorf("node %q cannot create a mirror pod with a persistent volume claim (volume %q)", node, v.Name))
		}
	}
	return nil
}

// oldPod is the stored pod an update or delete applies to.
func oldPod(a admission.Attributes) (*corev1.Pod, error) {
	pod, ok := a.GetOldObject().(*corev1.Pod)
	if !ok || pod == nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("cannot tell which node the pod is bound to: no stored pod (%T)", a.GetOldObject()))
	}
	return pod, nil
}

func boundTo(pod *corev1.Pod) string {
	if pod.Spec.NodeName == "" {
		return "not bound to any node"
	}
	return fmt.Sprintf("bound to node %q", pod.Spec.NodeName)
}

// admitNode lets a node write only its own Node object (and its status).
func (p *nodeRestriction) admitNode(node string, a admission.Attributes) error {
	name := a.GetName()
	if name == "" && a.GetOperation() == admission.Create {
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			name = m.GetName()
		}
	}
	if name != node {
		return admission.NewForbidden(a, fmt.Errorf("node %q is not allowed to modify node %q", node, name))
	}
	return nil
}

// admitLease lets a node write only its own Lease, in kube-node-lease.
func (p *nodeRestriction) admitLease(node string, a admission.Attributes) error {
	if a.GetNamespace() != corev1.NamespaceNodeLease {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only write leases in the %s namespace", node, corev1.NamespaceNodeLease))
	}
	name := a.GetName()
	if name == "" && a.GetOperation() == admission.Create {
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			name = m.GetName()
		}
	}
	if name != node {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only write its own lease (%q), not %q", node, node, name))
	}
	return nil
}
