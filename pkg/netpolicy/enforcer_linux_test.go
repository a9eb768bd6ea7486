//go:build linux

package netpolicy

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/runtime/network/nettest"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// The enforcer, as the identity rayctl gives it (so RBAC lets it list and watch what it needs), follows
// the API: a policy created closes a pod's port, a namespace's new label opens it to that namespace, and
// the policy deleted opens it again.
func TestEnforcerFollowsTheAPI(t *testing.T) {
	n := newNode(t)
	in := framework.StartTest(t, framework.ControlPlaneOnly()...)
	var writes atomic.Int32
	e, err := New(Options{RESTConfig: in.Identity(t, "rayctl:network-policy"), NetNS: n.m.NodeNSPath(),
		Written: func(r *Ruleset, took time.Duration, err error) {
			if err != nil {
				t.Errorf("writing the table: %v", err)
			}
			writes.Add(1)
			t.Logf("table written in %s: %s", took, Describe(r))
		}})
	if err != nil {
		t.Fatal(err)
	}
	n.table.conn.CloseLasting() // the enforcer owns the table from here
	ctx := framework.RunDuringTest(t, e.Run)
	c := in.Client
	for _, ns := range []string{"team", "other"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{n.pod("team", "web", web), n.pod("team", "client", client), n.pod("other", "outsider", client)} {
		obj := p.DeepCopy()
		obj.Spec.NodeName = "nowhere"
		obj.Spec.Containers[0].Image = "busybox"
		obj.Status = corev1.PodStatus{}
		if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.SetPodRunning(t, ctx, c, p.Namespace, p.Name, p.Status.PodIP, true)
	}

	pol := policy("team", web, networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"trusted": "yes"}}}},
	}}})
	if _, err := c.NetworkingV1().NetworkPolicies("team").Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitReach(ctx, "client", "web", false)
	n.waitReach(ctx, "outsider", "web", false)

	other, err := c.CoreV1().Namespaces().Get(ctx, "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Labels["trusted"] = "yes"
	if _, err := c.CoreV1().Namespaces().Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitReach(ctx, "outsider", "web", true)
	n.reach("client", "web", 8080, false)

	if err := c.NetworkingV1().NetworkPolicies("team").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitReach(ctx, "client", "web", true)
	t.Logf("%d table writes", writes.Load())
}

// waitReach waits until from's connections to to's port 8080 pass (ok) or are refused.
func (n *node) waitReach(ctx context.Context, from, to string, ok bool) {
	n.t.Helper()
	addr := net.JoinHostPort(n.pods[to].Status.PodIP, "8080")
	for {
		got, err := nettest.ReadLine(dialFrom(n.ns[from]), addr)
		if ok && err == nil && got == to || !ok && errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		select {
		case <-ctx.Done():
			n.t.Fatalf("%s → %s: %q, %v; want ok=%v", from, to, got, err, ok)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
