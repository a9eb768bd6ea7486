// Package node keeps a kubelet to what its own pods need, as Kubernetes' Node authorizer does. RBAC
// grants every node the same rights (the system:node ClusterRole, which holds no Secrets or ConfigMaps);
// this authorizer adds, for the node system:node:<name>, reads of exactly the Secrets, ConfigMaps,
// ServiceAccounts and PersistentVolumeClaims that pods bound to that node reference, one object at a time,
// and refuses a node's reads of any other, and lets it request tokens (serviceaccounts/token) only for the
// ServiceAccounts its pods run as. Writes are NodeRestriction admission's business (pkg/apiserver).
package node

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Node identities, as kubelets present them: the user system:node:<name> in the group system:nodes.
const (
	UserPrefix = "system:node:"
	Group      = "system:nodes"
)

// Identity returns the node u speaks for, if u is a node identity (a member of system:nodes named
// system:node:<name>); the name is empty when u is in system:nodes but not named like a node.
func Identity(u user.Info) (name string, isNode bool) {
	if u == nil || !slices.Contains(u.GetGroups(), Group) {
		return "", false
	}
	name, ok := strings.CutPrefix(u.GetName(), UserPrefix)
	if !ok {
		return "", true
	}
	return name, true
}

// Pods lists the pods of a namespace bound to a node, from the API server (so a pod the node has just
// been told about is never missed for want of a cache having caught up).
type Pods interface {
	OnNode(ctx context.Context, namespace, node string) ([]*corev1.Pod, error)
}

// Authorizer decides a node's reads of the objects its pods reference.
type Authorizer struct {
	sources []Pods
}

var _ authorizer.Authorizer = &Authorizer{}

// New returns an authorizer that looks pods up in sources, in order, until one shows a pod that uses
// the object asked for: a cache first (CachedPods), then a consistent read (APIPods) for a pod the
// cache has not seen yet.
func New(sources ...Pods) *Authorizer { return &Authorizer{sources: sources} }

// referenced maps each kind the authorizer decides to what a pod references of it.
var referenced = map[string]func(*corev1.Pod) []string{
	"secrets":                Secrets,
	"configmaps":             ConfigMaps,
	"serviceaccounts":        func(p *corev1.Pod) []string { return []string{serviceAccount(p)} },
	"persistentvolumeclaims": Claims,
}

// Authorize allows a node to get (or list or watch by name) a Secret, ConfigMap, ServiceAccount or
// PersistentVolumeClaim that a pod bound to it references, and to create a token of a ServiceAccount such
// a pod runs as, and denies a node every other request for those kinds. Other users and other resources
// get no opinion.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	node, isNode := Identity(attrs.GetUser())
	if !isNode || !attrs.IsResourceRequest() || attrs.GetAPIGroup() != "" {
		return authorizer.DecisionNoOpinion, "", nil
	}
	refs, ok := referenced[attrs.GetResource()]
	if !ok {
		return authorizer.DecisionNoOpinion, "", nil
	}
	kind := strings.TrimSuffix(attrs.GetResource(), "s")
	if node == "" {
		return authorizer.DecisionDeny, fmt.Sprintf("node authorizer: user %q is in %s but not named %s<node>", attrs.GetUser().GetName(), Group, UserPrefix), nil
	}
	switch {
	case attrs.GetResource() == "serviceaccounts" && attrs.GetSubresource() == "token":
		// TokenRequest: a node asks for the tokens of the accounts its pods run as, and for nothing else.
		if attrs.GetVerb() != "create" || attrs.GetName() == "" {
			return authorizer.DecisionDeny, fmt.Sprintf("node authorizer: node %q may only create tokens of a service account by name", node), nil
		}
	case attrs.GetSubresource() != "":
		return authorizer.DecisionNoOpinion, "", nil
	case !slices.Contains([]string{"get", "list", "watch"}, attrs.GetVerb()):
		return authorizer.DecisionDeny, fmt.Sprintf("node authorizer: node %q may only read %ss, not %s them", node, kind, attrs.GetVerb()), nil
	case attrs.GetName() == "":
		return authorizer.DecisionDeny, fmt.Sprintf("node authorizer: node %q may read only the %ss its pods reference, one by name, not %s them all", node, kind, attrs.GetVerb()), nil
	}
	ns, name := attrs.GetNamespace(), attrs.GetName()
	var err error
	for _, src := range a.sources {
		pods, e := src.OnNode(ctx, ns, node)
		if e != nil {
			err = e
			continue
		}
		for _, pod := range pods {
			if slices.Contains(refs(pod), name) {
				return authorizer.DecisionAllow, fmt.Sprintf("node authorizer: pod %s/%s on node %q uses %s %q", ns, pod.Name, node, kind, name), nil
			}
		}
	}
	if err != nil {
		// A deny with its reason, as Kubernetes' authorizers answer when they cannot decide: an error
		// beside it would make the API server answer 500 instead of 403. The error goes to the log.
		klog.FromContext(ctx).Error(err, "node authorizer: listing a node's pods failed; its read is refused", "node", node, "namespace", ns, "resource", attrs.GetResource(), "name", name)
		return authorizer.DecisionDeny, fmt.Sprintf("node authorizer: the pods of node %q in namespace %q could not be listed, so its use of %s %q is not known", node, ns, kind, name), nil
	}
	return authorizer.DecisionDeny, fmt.Sprintf("node authorizer: no pod bound to node %q in namespace %q uses %s %q", node, ns, kind, name), nil
}

func serviceAccount(p *corev1.Pod) string {
	if p.Spec.ServiceAccountName == "" {
		return "default"
	}
	return p.Spec.ServiceAccountName
}

// APIPods reads a node's pods through a client of the API server, with a consistent read.
type APIPods struct {
	// Client is a client with the right to list pods (the API server's loopback identity).
	Client kubernetes.Interface
}

// OnNode implements Pods.
func (p APIPods) OnNode(ctx context.Context, namespace, node string) ([]*corev1.Pod, error) {
	list, err := p.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// ConditionsAwareAuthorize answers as Authorize does; the node authorizer's decisions carry no conditions.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions refuses: the node authorizer makes no conditional decisions to evaluate.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}
