package statefulset_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/statefulset"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var in *framework.Instance

// TestMain runs the StatefulSet controller against a control plane without a kubelet.
func TestMain(m *testing.M) {
	framework.RunControllers(m, &in, map[string]ctrlset.SetupFunc{statefulset.Name: statefulset.Setup})
}

func newStatefulSet(replicas int32, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	labels := map[string]string{"app": "web"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         "web",
			PodManagementPolicy: policy,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{SchedulerName: "no-such-scheduler",
					Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}},
			},
		},
	}
}

// live returns the names of the StatefulSet's pods not being deleted, sorted, and the pods by name.
func live(t *testing.T, ctx context.Context, ns string) ([]string, map[string]*corev1.Pod) {
	t.Helper()
	list, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	framework.Must(t, "listing pods", err)
	var names []string
	byName := map[string]*corev1.Pod{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			names = append(names, list.Items[i].Name)
			byName[list.Items[i].Name] = &list.Items[i]
		}
	}
	slices.Sort(names)
	return names, byName
}

// settled waits until the controller has seen the StatefulSet's current generation and its status
// counts pods pods.
func settled(t *testing.T, ctx context.Context, ns string, pods int32) {
	t.Helper()
	framework.WaitFor(t, ctx, fmt.Sprintf("status with %d pods", pods), func() (bool, error) {
		s, err := in.Client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return s.Status.ObservedGeneration == s.Generation && s.Status.Replicas == pods, nil
	})
}

func ready(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	framework.SetPodRunning(t, ctx, in.Client, ns, name, "10.9.0."+name[strings.LastIndex(name, "-")+1:], true)
}

func waitPods(t *testing.T, ctx context.Context, ns string, want ...string) map[string]*corev1.Pod {
	t.Helper()
	var pods map[string]*corev1.Pod
	framework.WaitFor(t, ctx, "pods "+strings.Join(want, ","), func() (bool, error) {
		var names []string
		names, pods = live(t, ctx, ns)
		return slices.Equal(names, want), nil
	})
	return pods
}

// TestOrderedReady creates each pod only once the one before is ready, and removes the highest first.
func TestOrderedReady(t *testing.T) {
	ctx := framework.TestContext(t, 60*time.Second)
	ns := in.NewNamespace(t, ctx, "ordered-")
	_, err := in.Client.AppsV1().StatefulSets(ns).Create(ctx, newStatefulSet(3, appsv1.OrderedReadyPodManagement), metav1.CreateOptions{})
	framework.Must(t, "creating the statefulset", err)
	for i, name := range []string{"web-0", "web-1", "web-2"} {
		pods := waitPods(t, ctx, ns, []string{"web-0", "web-1", "web-2"}[:i+1]...)
		settled(t, ctx, ns, int32(i+1))
		if names, _ := live(t, ctx, ns); len(names) != i+1 {
			t.Fatalf("pods %v while %s is not ready", names, name)
		}
		p := pods[name]
		if p.Spec.Hostname != name || p.Spec.Subdomain != "web" || p.Labels[statefulset.PodNameLabel] != name || p.Labels[statefulset.PodIndexLabel] != fmt.Sprint(i) {
			t.Errorf("%s: hostname %q subdomain %q labels %v", name, p.Spec.Hostname, p.Spec.Subdomain, p.Labels)
		}
		ready(t, ctx, ns, name)
	}
	patch(t, ctx, ns, `{"spec":{"replicas":1}}`)
	waitPods(t, ctx, ns, "web-0", "web-1")
	waitPods(t, ctx, ns, "web-0")
}

// TestParallel creates every pod at once.
func TestParallel(t *testing.T) {
	ctx := framework.TestContext(t, 60*time.Second)
	ns := in.NewNamespace(t, ctx, "parallel-")
	_, err := in.Client.AppsV1().StatefulSets(ns).Create(ctx, newStatefulSet(3, appsv1.ParallelPodManagement), metav1.CreateOptions{})
	framework.Must(t, "creating the statefulset", err)
	waitPods(t, ctx, ns, "web-0", "web-1", "web-2")
}

// TestRollingUpdatePartition replaces pods from the highest ordinal down to the partition, one at a time.
func TestRollingUpdatePartition(t *testing.T) {
	ctx := framework.TestContext(t, 60*time.Second)
	ns := in.NewNamespace(t, ctx, "partition-")
	_, err := in.Client.AppsV1().StatefulSets(ns).Create(ctx, newStatefulSet(3, appsv1.ParallelPodManagement), metav1.CreateOptions{})
	framework.Must(t, "creating the statefulset", err)
	for name := range waitPods(t, ctx, ns, "web-0", "web-1", "web-2") {
		ready(t, ctx, ns, name)
	}
	settled(t, ctx, ns, 3)
	s, err := in.Client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
	framework.Must(t, "reading the statefulset", err)
	first := s.Status.UpdateRevision
	patch(t, ctx, ns, `{"spec":{"updateStrategy":{"rollingUpdate":{"partition":1}},"template":{"spec":{"containers":[{"name":"main","env":[{"name":"V","value":"2"}]}]}}}}`)
	revisionOf := func(name string) string {
		_, pods := live(t, ctx, ns)
		if p := pods[name]; p != nil {
			return p.Labels[appsv1.ControllerRevisionHashLabelKey]
		}
		return ""
	}
	var second string
	for _, name := range []string{"web-2", "web-1"} {
		framework.WaitFor(t, ctx, name+" at the new revision", func() (bool, error) {
			s, err := in.Client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			second = s.Status.UpdateRevision
			rev := revisionOf(name)
			return second != first && rev == second, nil
		})
		if name == "web-2" && revisionOf("web-1") != first {
			t.Errorf("web-1 replaced while web-2 was not ready")
		}
		ready(t, ctx, ns, name)
	}
	// The status the rollout ends in. Not settled(3): a reconcile writes the status of the pods it read
	// before it acted, so the write of the pass that made the new web-1 (which counts 2 pods) may land
	// after the test has seen that pod, behind an earlier write that counted 3.
	framework.WaitFor(t, ctx, "the status of the finished rollout", func() (bool, error) {
		s, err = in.Client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := s.Status
		return st.ObservedGeneration == s.Generation && st.Replicas == 3 && st.ReadyReplicas == 3 && st.UpdatedReplicas == 2, nil
	})
	if revisionOf("web-0") != first || s.Status.CurrentRevision != first || s.Status.CurrentReplicas != 1 {
		t.Errorf("below the partition: web-0 at %s, status %+v", revisionOf("web-0"), s.Status)
	}
}

// patch applies a strategic merge patch to the StatefulSet.
func patch(t *testing.T, ctx context.Context, ns, p string) {
	t.Helper()
	_, err := in.Client.AppsV1().StatefulSets(ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{})
	framework.Must(t, "patching the statefulset", err)
}
