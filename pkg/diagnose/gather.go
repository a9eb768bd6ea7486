package diagnose

import (
	"context"
	"fmt"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// Clients are what Gather reads with, all as the admin.
type Clients struct {
	Kube  kubernetes.Interface
	Ray   rayclient.Interface
	Chain chain.Source
	// Operator is what the caller says of a Ray operator outside rayctl; it is looked for when a kind
	// involved has no rayctl controller.
	Operator OperatorOptions
}

// Gather reads what the checks need about kind namespace/name (kind one of KindPod, KindRayCluster,
// KindRayJob, KindRayService): the object and the objects around it, the recorder's events about the namespace and
// its controllers, the access reviews of AccessRequests, and the bindings of the controllers'
// identities. The object must exist; the rest may be missing (a chain recorder that cannot be read
// leaves ChainError set).
func Gather(ctx context.Context, c Clients, kind, namespace, name string) (*Input, error) {
	in := &Input{Kind: kind, Namespace: namespace, Name: name}
	switch kind {
	case KindPod:
		pod, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		in.Pod = pod
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == KindRayCluster {
			in.ClusterName = ref.Name
		}
	case KindRayCluster:
		in.ClusterName = name
	case KindRayJob:
		job, err := c.Ray.RayV1().RayJobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		in.Job = job
		in.ClusterName = job.Status.RayClusterName
		if in.ClusterName == "" {
			in.ClusterName = job.Spec.ClusterSelector[rayparams.LabelCluster]
		}
	case KindRayService:
		svc, err := c.Ray.RayV1().RayServices(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		in.Service = svc
		in.ClusterName = svc.Status.PendingServiceStatus.RayClusterName
		if in.ClusterName == "" {
			in.ClusterName = svc.Status.ActiveServiceStatus.RayClusterName
		}
	default:
		return nil, fmt.Errorf("diagnose follows Pods, RayClusters, RayJobs and RayServices, not %s", kind)
	}
	if in.ClusterName != "" {
		cl, err := c.Ray.RayV1().RayClusters(namespace).Get(ctx, in.ClusterName, metav1.GetOptions{})
		switch {
		case err == nil:
			in.Cluster = cl
		case apierrors.IsNotFound(err):
			if kind == KindRayCluster {
				return nil, err
			}
		default:
			return nil, err
		}
		pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: rayparams.LabelCluster + "=" + in.ClusterName})
		if err != nil {
			return nil, err
		}
		in.ClusterPods = pods.Items
		if in.Pod == nil {
			in.Pod = headPod(pods.Items)
		}
	}

	if c.Chain != nil {
		ctrls, err := c.Chain.Controllers(ctx)
		if err == nil {
			in.Controllers = ctrls
			var list *chain.EventList
			if list, err = c.Chain.Events(ctx, chain.Filter{Namespace: namespace}); err == nil {
				in.Events, in.RecorderSize = list.Events, list.Size
			}
			// The lists and watches of all namespaces (an operator's cache) have none.
			var reads *chain.EventList
			if err == nil {
				if reads, err = c.Chain.Events(ctx, chain.Filter{Hop: chain.APIRead}); err == nil {
					in.Events = mergeEvents(in.Events, reads.Events)
				}
			}
		}
		if err != nil {
			in.ChainError = err.Error()
		}
	} else {
		in.ChainError = "no chain client"
	}

	in.Now = time.Now()
	if needsOperator(in) {
		in.Operator = gatherOperator(ctx, c, in)
		in.ObjectEvents = objectEvents(ctx, c.Kube, in)
	}
	in.Ray = askRay(ctx, c.Kube, in)
	in.Access = AccessRequests(in)
	for i := range in.Access {
		var groups []string
		if in.Operator != nil && in.Access[i].User == in.Operator.User {
			groups = in.Operator.Groups
		}
		review(ctx, c.Kube, &in.Access[i], groups)
	}
	in.Bindings = bindings(ctx, c.Kube, namespace, identities(in))
	return in, nil
}

// headPod is the live head Pod among pods, nil if none.
func headPod(pods []corev1.Pod) *corev1.Pod {
	for _, p := range livePods(pods) {
		if p.Labels[rayparams.LabelNodeType] == string(rayv1.HeadNode) {
			return p
		}
	}
	return nil
}

// review asks the authorizer whether a.User may do what a describes, as the request would come
// (with groups, else an authenticated user's).
func review(ctx context.Context, kube kubernetes.Interface, a *Access, groups []string) {
	if len(groups) == 0 {
		groups = []string{"system:authenticated"}
	}
	resource, sub, _ := strings.Cut(a.Resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   a.User,
		Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.Namespace, Verb: a.Verb, Group: a.Group, Resource: resource, Subresource: sub, Name: a.Name,
		},
	}}
	got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		a.Error = err.Error()
		return
	}
	a.Allowed, a.Reason, a.Error = got.Status.Allowed, got.Status.Reason, got.Status.EvaluationError
}

// identities are the users the controllers involved act as.
func identities(in *Input) map[string]bool {
	out := map[string]bool{}
	for _, a := range in.Access {
		out[a.User] = true
	}
	return out
}

// bindings lists the ClusterRoleBindings, and the RoleBindings of namespace, that bind one of users
// (best effort: a listing that fails leaves them out).
func bindings(ctx context.Context, kube kubernetes.Interface, namespace string, users map[string]bool) []Binding {
	if len(users) == 0 {
		return nil
	}
	var out []Binding
	add := func(kind, ns, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
		for _, s := range subjects {
			if s.Kind == rbacv1.UserKind && users[s.Name] {
				out = append(out, Binding{Kind: kind, Namespace: ns, Name: name, RoleKind: ref.Kind, RoleName: ref.Name, User: s.Name})
			}
		}
	}
	if crbs, err := kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for _, b := range crbs.Items {
			add("ClusterRoleBinding", "", b.Name, b.RoleRef, b.Subjects)
		}
	}
	if rbs, err := kube.RbacV1().RoleBindings(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, b := range rbs.Items {
			add("RoleBinding", b.Namespace, b.Name, b.RoleRef, b.Subjects)
		}
	}
	return out
}

// mergeEvents merges two lists of events sorted by Seq, without duplicates.
func mergeEvents(a, b []chain.Event) []chain.Event {
	out := make([]chain.Event, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Seq < b[j].Seq):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Seq < a[i].Seq:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}
