package deployment_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/deployment"
	"github.com/rayctl/rayctl/pkg/controllers/kube/gc"
	"github.com/rayctl/rayctl/pkg/controllers/kube/replicaset"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var in *framework.Instance

// TestMain runs the Deployment, ReplicaSet and garbage collector controllers against a control plane
// without a kubelet.
func TestMain(m *testing.M) {
	framework.RunControllers(m, &in, map[string]ctrlset.SetupFunc{
		deployment.Name: deployment.Setup, replicaset.Name: replicaset.Setup, gc.Name: gc.Setup})
}

// newDeployment is a Deployment of four pods that no scheduler binds.
func newDeployment(strategy appsv1.DeploymentStrategy) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(4)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: strategy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{SchedulerName: "no-such-scheduler",
					Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// census counts the live pods by pod-template-hash and how many are ready.
type census struct {
	byHash map[string]int
	live   int
	ready  int
}

// kubelet marks every live pod Running and Ready, and returns the census from before.
func kubelet(t *testing.T, ctx context.Context, ns string) census {
	t.Helper()
	list, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	framework.Must(t, "listing pods", err)
	c := census{byHash: map[string]int{}}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		c.live++
		c.byHash[p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]]++
		if p.Status.Phase == corev1.PodRunning {
			c.ready++
			continue
		}
		framework.SetPodRunning(t, ctx, in.Client, ns, p.Name, fmt.Sprintf("10.9.0.%d", i+1), true)
	}
	return c
}

// rollOut plays the kubelet until the Deployment has rolled out its current generation, checking each
// census along the way.
func rollOut(t *testing.T, ctx context.Context, ns string, check func(census)) {
	t.Helper()
	framework.WaitFor(t, ctx, "the rollout", func() (bool, error) {
		check(kubelet(t, ctx, ns))
		d, err := in.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := d.Status
		return st.ObservedGeneration == d.Generation && st.UpdatedReplicas == 4 && st.Replicas == 4 && st.AvailableReplicas == 4, nil
	})
}

func changeTemplate(t *testing.T, ctx context.Context, ns, value string) {
	t.Helper()
	d, err := in.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	framework.Must(t, "reading the deployment", err)
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "V", Value: value}}
	_, err = in.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	framework.Must(t, "changing the template", err)
}

// TestRollingUpdateKeepsWithinSurgeAndUnavailable rolls a template change out over four pods with
// maxSurge 1 and maxUnavailable 1: never more than five pods, never fewer than three ready.
func TestRollingUpdateKeepsWithinSurgeAndUnavailable(t *testing.T) {
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "rolling-")
	one := intstr.FromInt32(1)
	_, err := in.Client.AppsV1().Deployments(ns).Create(ctx, newDeployment(appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one},
	}), metav1.CreateOptions{})
	framework.Must(t, "creating the deployment", err)
	rollOut(t, ctx, ns, func(c census) {
		if c.live > 4 {
			t.Fatalf("%d pods for 4 replicas before any update", c.live)
		}
	})
	for _, v := range []string{"2", "3"} {
		changeTemplate(t, ctx, ns, v)
		hashes := map[string]bool{}
		rollOut(t, ctx, ns, func(c census) {
			if c.live > 5 {
				t.Fatalf("%d pods: more than replicas + maxSurge (5)", c.live)
			}
			if c.ready < 3 {
				t.Fatalf("%d ready pods: fewer than replicas - maxUnavailable (3)", c.ready)
			}
			for h := range c.byHash {
				hashes[h] = true
			}
		})
		if len(hashes) != 2 {
			t.Errorf("rollout %s saw pods of %d templates, want the old and the new", v, len(hashes))
		}
	}
	sets, err := in.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	framework.Must(t, "listing replica sets", err)
	revisions := map[string]int32{}
	for _, rs := range sets.Items {
		revisions[rs.Annotations[deployment.RevisionAnnotation]] = *rs.Spec.Replicas
	}
	if len(revisions) != 3 || revisions["1"] != 0 || revisions["2"] != 0 || revisions["3"] != 4 {
		t.Errorf("replica sets by revision (replicas): %v", revisions)
	}
}

// TestRecreateNeverOverlaps replaces every pod at once under Recreate: no new pod while an old one lives.
func TestRecreateNeverOverlaps(t *testing.T) {
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "recreate-")
	_, err := in.Client.AppsV1().Deployments(ns).Create(ctx, newDeployment(appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}), metav1.CreateOptions{})
	framework.Must(t, "creating the deployment", err)
	rollOut(t, ctx, ns, func(census) {})
	changeTemplate(t, ctx, ns, "2")
	rollOut(t, ctx, ns, func(c census) {
		if len(c.byHash) > 1 {
			t.Fatalf("pods of two templates at once under Recreate: %v", c.byHash)
		}
	})
}

// TestRevisionHistoryLimit keeps only the newest old ReplicaSets.
func TestRevisionHistoryLimit(t *testing.T) {
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "history-")
	d := newDeployment(appsv1.DeploymentStrategy{})
	d.Spec.RevisionHistoryLimit = ptr(int32(1))
	_, err := in.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	framework.Must(t, "creating the deployment", err)
	rollOut(t, ctx, ns, func(census) {})
	for _, v := range []string{"2", "3", "4"} {
		changeTemplate(t, ctx, ns, v)
		rollOut(t, ctx, ns, func(census) {})
	}
	framework.WaitFor(t, ctx, "two replica sets left", func() (bool, error) {
		sets, err := in.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		kept := map[string]bool{}
		for _, rs := range sets.Items {
			kept[rs.Annotations[deployment.RevisionAnnotation]] = true
		}
		return len(sets.Items) == 2 && kept["3"] && kept["4"], nil
	})
}
