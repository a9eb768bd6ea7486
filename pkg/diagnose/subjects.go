package diagnose

import (
	"sort"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/chain"
)

// diag is one diagnosis in progress.
type diag struct {
	in   *Input
	subs []subj
}

// subj is one object the checks look at.
type subj struct {
	Subject
	// obj is the object, nil if it does not exist.
	obj metav1.Object
}

func newDiag(in *Input) *diag {
	d := &diag{in: in}
	if in.Pod != nil {
		d.subs = append(d.subs, subj{Subject{KindPod, in.Pod.Namespace, in.Pod.Name}, in.Pod})
	}
	if in.ClusterName != "" {
		s := subj{Subject: Subject{KindRayCluster, in.Namespace, in.ClusterName}}
		if in.Cluster != nil {
			s.obj = in.Cluster
		}
		d.subs = append(d.subs, s)
	}
	if in.Job != nil {
		d.subs = append(d.subs, subj{Subject{KindRayJob, in.Job.Namespace, in.Job.Name}, in.Job})
	}
	if in.Service != nil {
		d.subs = append(d.subs, subj{Subject{KindRayService, in.Service.Namespace, in.Service.Name}, in.Service})
	}
	return d
}

func (d *diag) subjects() []Subject {
	out := make([]Subject, len(d.subs))
	for i, s := range d.subs {
		out[i] = s.Subject
	}
	return out
}

// subject returns the subject of kind, if any.
func (d *diag) subject(kind string) *subj {
	for i := range d.subs {
		if d.subs[i].Kind == kind {
			return &d.subs[i]
		}
	}
	return nil
}

// controller returns the controller whose keys are of kind (RayCluster, RayJob), nil if none runs.
func (d *diag) controller(kind string) *chain.ControllerInfo {
	for i := range d.in.Controllers {
		if d.in.Controllers[i].Kind == kind {
			return &d.in.Controllers[i]
		}
	}
	return nil
}

// watcherKinds are the key kinds of the controllers that must see s's changes: the RayCluster
// controller for Pods and RayClusters, and the RayJob controller for RayJobs and (when a RayJob is
// diagnosed) its RayCluster.
func (d *diag) watcherKinds(s *subj) []string {
	switch s.Kind {
	case KindPod:
		return []string{KindRayCluster}
	case KindRayCluster:
		if d.in.Job != nil {
			return []string{KindRayCluster, KindRayJob}
		}
		if d.in.Service != nil {
			return []string{KindRayCluster, KindRayService}
		}
		return []string{KindRayCluster}
	case KindRayJob:
		return []string{KindRayJob}
	case KindRayService:
		return []string{KindRayService}
	}
	return nil
}

// lower is s in lower case.
func lower(s string) string { return strings.ToLower(s) }

// resourceOf is the API group and resource of a kind.
func resourceOf(kind string) (group, resource string) {
	switch kind {
	case KindPod:
		return "", "pods"
	case KindRayCluster:
		return rayv1.GroupVersion.Group, "rayclusters"
	case KindRayJob:
		return rayv1.GroupVersion.Group, "rayjobs"
	case KindRayService:
		return rayv1.GroupVersion.Group, "rayservices"
	}
	return "", lower(kind) + "s"
}

// reviewVerbs are the verbs a controller's cache needs on what it watches.
var reviewVerbs = []string{"get", "list", "watch"}

// AccessRequests are the SubjectAccessReviews the checks need for in (Allowed not filled in): get,
// list and watch on each diagnosed object's kind, for each controller identity that watches it. A
// list or watch is reviewed in the object's namespace if the controller watches only some
// namespaces, else across all of them, as its cache asks.
func AccessRequests(in *Input) []Access {
	d := newDiag(in)
	seen := map[Access]bool{}
	var out []Access
	for i := range d.subs {
		s := &d.subs[i]
		if op := d.external(s); op != nil {
			for _, a := range operatorAccess(op, s) {
				if !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
			continue
		}
		for _, k := range d.watcherKinds(s) {
			c := d.controller(k)
			if c == nil || c.Identity == "" {
				continue
			}
			for _, a := range accessFor(c, s) {
				if !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
		}
	}
	return out
}

// accessFor are the reviews of c's identity on s.
func accessFor(c *chain.ControllerInfo, s *subj) []Access {
	group, resource := resourceOf(s.Kind)
	out := make([]Access, 0, len(reviewVerbs))
	for _, verb := range reviewVerbs {
		a := Access{User: c.Identity, Verb: verb, Group: group, Resource: resource}
		switch {
		case verb == "get":
			a.Namespace, a.Name = s.Namespace, s.Name
		case len(c.WatchNamespaces) > 0:
			a.Namespace = s.Namespace
		}
		out = append(out, a)
	}
	return out
}

// access returns the answer to the review like a (ignoring Allowed, Reason and Error), nil if none.
func (d *diag) access(a Access) *Access {
	for i := range d.in.Access {
		x := d.in.Access[i]
		if x.User == a.User && x.Verb == a.Verb && x.Group == a.Group && x.Resource == a.Resource && x.Namespace == a.Namespace && x.Name == a.Name {
			return &d.in.Access[i]
		}
	}
	return nil
}

// rolesOf names the roles bound to user, the one named like the user first.
func (d *diag) rolesOf(user string) []Binding {
	var out []Binding
	for _, b := range d.in.Bindings {
		if b.User == user {
			out = append(out, b)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].RoleName == user && out[j].RoleName != user })
	return out
}
