package diagnose

import (
	"context"
	"errors"
	"testing"

	rayfake "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/fake"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rayctl/rayctl/pkg/chain"
)

// fakeChain is a recorder that answers with fixed events and controllers (or an error); diagnose
// neither watches nor traces.
type fakeChain struct {
	chain.Source
	events []chain.Event
	ctrls  []chain.ControllerInfo
	err    error
	filter chain.Filter
}

func (f *fakeChain) Events(_ context.Context, flt chain.Filter) (*chain.EventList, error) {
	if f.filter == (chain.Filter{}) {
		f.filter = flt // the first: the namespace's events
	}
	return &chain.EventList{Size: 100, Events: f.events}, f.err
}

func (f *fakeChain) Controllers(context.Context) ([]chain.ControllerInfo, error) {
	return f.ctrls, f.err
}

// sarDenying answers SubjectAccessReviews, denying the verbs in deny.
func sarDenying(deny ...string) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = true
		for _, v := range deny {
			if sar.Spec.ResourceAttributes.Verb == v {
				sar.Status.Allowed = false
			}
		}
		if len(sar.Spec.Groups) == 0 || sar.Spec.Groups[0] != "system:authenticated" {
			sar.Status.Allowed, sar.Status.EvaluationError = false, "review without the authenticated group"
		}
		return true, sar, nil
	}
}

func TestGatherPod(t *testing.T) {
	in0, r := healthyPod()
	worker := rayPod("rc-worker-y", "rc", "uid-rc", "worker")
	other := rayPod("other-head", "other", "uid-o", "head")
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: identity},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: identity},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: identity}}}
	kube := fake.NewClientset(in0.Pod, worker, other, crb)
	kube.PrependReactor("create", "subjectaccessreviews", sarDenying("watch"))
	ray := rayfake.NewSimpleClientset(in0.Cluster)
	ch := &fakeChain{events: r.events, ctrls: controllers()}

	in, err := Gather(context.Background(), Clients{Kube: kube, Ray: ray, Chain: ch}, KindPod, ns, in0.Pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if in.ClusterName != "rc" || in.Cluster == nil || len(in.ClusterPods) != 2 || in.Pod.Name != in0.Pod.Name {
		t.Errorf("gathered cluster %q (%v) with %d pods, pod %v", in.ClusterName, in.Cluster != nil, len(in.ClusterPods), in.Pod.Name)
	}
	if ch.filter.Namespace != ns || len(in.Events) != len(r.events) || len(in.Controllers) != 3 || in.RecorderSize != 100 {
		t.Errorf("events filter %+v, %d events, %d controllers", ch.filter, len(in.Events), len(in.Controllers))
	}
	if len(in.Access) != 6 {
		t.Errorf("%d reviews, want get/list/watch on pods and rayclusters: %+v", len(in.Access), in.Access)
	}
	if len(in.Bindings) != 1 || in.Bindings[0].RoleName != identity {
		t.Errorf("bindings %+v", in.Bindings)
	}
	rep := Run(in)
	expect(t, rep, "c", CauseRBACDenied, "rayctl:controllers may not watch pods", "ClusterRole rayctl:controllers")
}

func TestGatherRayJob(t *testing.T) {
	in0, r := pendingJob()
	kube := fake.NewClientset(in0.Pod)
	kube.PrependReactor("create", "subjectaccessreviews", sarDenying())
	ray := rayfake.NewSimpleClientset(in0.Job, in0.Cluster)
	in, err := Gather(context.Background(), Clients{Kube: kube, Ray: ray, Chain: &fakeChain{events: r.events, ctrls: controllers()}}, KindRayJob, ns, "job")
	if err != nil {
		t.Fatal(err)
	}
	if in.Job == nil || in.Cluster == nil || in.Pod == nil || in.Pod.Name != "job-rc-head-x" {
		t.Fatalf("gathered job %v cluster %v head %v", in.Job != nil, in.Cluster != nil, in.Pod)
	}
	expect(t, Run(in), "g", CauseClusterNotReady, "Insufficient cpu")
}

func TestGatherWithoutRecorder(t *testing.T) {
	in0, _ := healthyPod()
	kube := fake.NewClientset(in0.Pod)
	ray := rayfake.NewSimpleClientset(in0.Cluster)
	in, err := Gather(context.Background(), Clients{Kube: kube, Ray: ray, Chain: &fakeChain{err: errors.New("no recorder")}}, KindRayCluster, ns, "rc")
	if err != nil {
		t.Fatal(err)
	}
	if in.ChainError != "no recorder" || in.Pod == nil {
		t.Errorf("chain error %q, head %v", in.ChainError, in.Pod)
	}
	if _, err := Gather(context.Background(), Clients{Kube: kube, Ray: ray}, KindRayCluster, ns, "missing"); err == nil {
		t.Error("a RayCluster that does not exist: no error")
	}
	if _, err := Gather(context.Background(), Clients{Kube: kube, Ray: ray}, "Service", ns, "x"); err == nil {
		t.Error("a Service: no error")
	}
}
