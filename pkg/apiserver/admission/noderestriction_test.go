package admission

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
)

func TestNodeRestriction(t *testing.T) {
	nodeA := &user.DefaultInfo{Name: "system:node:a", Groups: []string{"system:nodes", "system:authenticated"}}
	unnamed := &user.DefaultInfo{Name: "kubelet", Groups: []string{"system:nodes"}}
	notInGroup := &user.DefaultInfo{Name: "system:node:b", Groups: []string{"system:authenticated"}}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}

	pod := func(node string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	}
	mirror := func(p *corev1.Pod) *corev1.Pod {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
		return p
	}
	withSecret := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
		return p
	}
	withSA := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.ServiceAccountName = "robot"
		return p
	}
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	lease := func(ns, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	}
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	nodes := corev1.SchemeGroupVersion.WithResource("nodes")
	leases := coordinationv1.SchemeGroupVersion.WithResource("leases")
	events := eventsv1.SchemeGroupVersion.WithResource("events")
	accounts := corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	token := func(kind, name string) *authenticationv1.TokenRequest {
		tr := &authenticationv1.TokenRequest{}
		if kind != "" {
			tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: kind, APIVersion: "v1", Name: name}
		}
		return tr
	}
	type request struct {
		u        user.Info
		op       admission.Operation
		resource schema.GroupVersionResource
		sub      string
		ns, name string
		obj, old runtime.Object
	}
	for _, tc := range []struct {
		name string
		req  request
		want string // "" means admitted, else a piece of the 403's message
	}{
		{"own pod status", request{nodeA, admission.Update, pods, "status", "ns", "p", pod("a", nil), pod("a", nil)}, ""},
		{"status of a pod on another node", request{nodeA, admission.Update, pods, "status", "ns", "p", pod("b", nil), pod("b", nil)},
			`pods "p" is forbidden: node "a" can only update the status of pods with spec.nodeName set to itself, not of a pod bound to node "b"`},
		{"status of an unbound pod", request{nodeA, admission.Update, pods, "status", "ns", "p", pod("a", nil), pod("", nil)}, "not bound to any node"},
		{"labels through status", request{nodeA, admission.Update, pods, "status", "ns", "p", pod("a", map[string]string{"x": "y"}), pod("a", nil)},
			"cannot update labels through pod status"},
		{"status without the stored pod", request{nodeA, admission.Update, pods, "status", "ns", "p", pod("a", nil), nil}, "no stored pod"},
		{"create a mirror pod bound to itself", request{nodeA, admission.Create, pods, "", "ns", "p", mirror(pod("a", nil)), nil}, ""},
		{"create a pod that is not a mirror pod", request{nodeA, admission.Create, pods, "", "ns", "p", pod("a", nil), nil},
			`node "a" can only create mirror pods (annotated kubernetes.io/config.mirror)`},
		{"a mirror pod with a secret", request{nodeA, admission.Create, pods, "", "ns", "p", withSecret(mirror(pod("a", nil))), nil},
			`cannot create a mirror pod that uses secret "s"`},
		{"a mirror pod with a service account", request{nodeA, admission.Create, pods, "", "ns", "p", withSA(mirror(pod("a", nil))), nil},
			`cannot create a mirror pod that uses service account "robot"`},
		{"create a pod bound elsewhere", request{nodeA, admission.Create, pods, "", "ns", "p", mirror(pod("b", nil)), nil},
			`node "a" can only create pods with spec.nodeName set to itself, not "b"`},
		{"delete own pod", request{nodeA, admission.Delete, pods, "", "ns", "p", nil, pod("a", nil)}, ""},
		{"delete another node's pod", request{nodeA, admission.Delete, pods, "", "ns", "p", nil, pod("b", nil)},
			`node "a" can only delete pods with spec.nodeName set to itself, not bound to node "b"`},
		{"update a pod", request{nodeA, admission.Update, pods, "", "ns", "p", pod("a", nil), pod("a", nil)}, "not update them"},
		{"bind a pod", request{nodeA, admission.Create, pods, "binding", "ns", "p", &corev1.Binding{}, nil}, "may not use pods/binding"},
		{"own node", request{nodeA, admission.Update, nodes, "", "", "a", node("a"), node("a")}, ""},
		{"own node status", request{nodeA, admission.Update, nodes, "status", "", "a", node("a"), node("a")}, ""},
		{"register itself", request{nodeA, admission.Create, nodes, "", "", "", node("a"), nil}, ""},
		{"another node", request{nodeA, admission.Update, nodes, "", "", "b", node("b"), node("b")},
			`nodes "b" is forbidden: node "a" is not allowed to modify node "b"`},
		{"another node's status", request{nodeA, admission.Update, nodes, "status", "", "b", node("b"), node("b")}, `not allowed to modify node "b"`},
		{"register another node", request{nodeA, admission.Create, nodes, "", "", "", node("b"), nil}, `not allowed to modify node "b"`},
		{"delete another node", request{nodeA, admission.Delete, nodes, "", "", "b", nil, node("b")}, `not allowed to modify node "b"`},
		{"own lease", request{nodeA, admission.Update, leases, "", "kube-node-lease", "a", lease("kube-node-lease", "a"), lease("kube-node-lease", "a")}, ""},
		{"create own lease", request{nodeA, admission.Create, leases, "", "kube-node-lease", "", lease("kube-node-lease", "a"), nil}, ""},
		{"another node's lease", request{nodeA, admission.Update, leases, "", "kube-node-lease", "b", lease("kube-node-lease", "b"), lease("kube-node-lease", "b")},
			`node "a" can only write its own lease ("a"), not "b"`},
		{"a lease elsewhere", request{nodeA, admission.Create, leases, "", "default", "a", lease("default", "a"), nil}, "only write leases in the kube-node-lease namespace"},
		{"events", request{nodeA, admission.Create, events, "", "ns", "e", &eventsv1.Event{}, nil}, ""},
		{"a node without a node name", request{unnamed, admission.Update, nodes, "", "", "a", node("a"), node("a")}, `could not tell which node user "kubelet"`},
		{"a node name outside system:nodes", request{notInGroup, admission.Update, nodes, "", "", "a", node("a"), node("a")}, ""},
		{"admin", request{admin, admission.Update, pods, "status", "ns", "p", pod("b", nil), pod("b", nil)}, ""},
		{"a token bound to its pod", request{nodeA, admission.Create, accounts, "token", "ns", "robot", token("Pod", "mine"), nil}, ""},
		{"a token bound to another node's pod", request{nodeA, admission.Create, accounts, "token", "ns", "robot", token("Pod", "theirs"), nil},
			`pod ns/theirs is bound to node "b"`},
		{"an unbound token", request{nodeA, admission.Create, accounts, "token", "ns", "robot", token("", ""), nil}, "only request tokens bound to a pod"},
		{"a token bound to a secret", request{nodeA, admission.Create, accounts, "token", "ns", "robot", token("Secret", "s"), nil}, "bound to a pod"},
		{"admin's unbound token", request{admin, admission.Create, accounts, "token", "ns", "robot", token("", ""), nil}, ""},
	} {
		r := tc.req
		kind := r.resource.GroupVersion().WithKind("")
		attrs := admission.NewAttributesRecord(r.obj, r.old, kind, r.ns, r.name, r.resource, r.sub, r.op, nil, false, r.u)
		p := newNodeRestriction(func(_ context.Context, ns, name string) (*corev1.Pod, error) {
			p := pod("a", nil)
			if name == "theirs" {
				p = pod("b", nil)
			}
			p.Namespace, p.Name = ns, name
			return p, nil
		})
		if !p.Handles(r.op) {
			t.Errorf("%s: the plugin does not handle %s", tc.name, r.op)
			continue
		}
		err := p.Validate(context.Background(), attrs, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want admitted", tc.name, err)
		case tc.want != "" && !apierrors.IsForbidden(err):
			t.Errorf("%s: %v, want 403", tc.name, err)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %q does not say %q", tc.name, err, tc.want)
		}
	}
	if newNodeRestriction(nil).Handles(admission.Connect) {
		t.Error("the plugin handles connect requests")
	}
}

// A token request for a pod the cache shows bound to the node, with the UID asked for, is admitted
// without a read through the API; anything else the cache shows (another node, another UID, no pod) is
// left to the consistent read, which has the last word.
func TestNodeRestrictionTokenFromCache(t *testing.T) {
	nodeA := &user.DefaultInfo{Name: "system:node:a", Groups: []string{"system:nodes"}}
	accounts := corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	cachedPod := func(node, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID(uid)}, Spec: corev1.PodSpec{NodeName: node}}
	}
	for _, tc := range []struct {
		name     string
		cached   *corev1.Pod
		uid      string
		stored   string // node the API's pod is bound to
		wantRead bool
		want     string
	}{
		{"cached on this node", cachedPod("a", "u1"), "u1", "a", false, ""},
		{"cached, another UID", cachedPod("a", "u0"), "u1", "b", true, `bound to node "b"`},
		{"cached on another node", cachedPod("b", "u1"), "u1", "a", true, ""},
		{"not cached yet", nil, "u1", "a", true, ""},
		{"not cached, stored elsewhere", nil, "u1", "b", true, `bound to node "b"`},
		{"no UID asked", cachedPod("a", "u1"), "", "b", true, `bound to node "b"`},
	} {
		read := false
		p := newNodeRestriction(func(_ context.Context, ns, name string) (*corev1.Pod, error) {
			read = true
			return cachedPod(tc.stored, tc.uid), nil
		})
		p.cached = func(ns, name string) *corev1.Pod {
			if ns != "ns" || name != "p" {
				return nil
			}
			return tc.cached
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: types.UID(tc.uid)}}}
		attrs := admission.NewAttributesRecord(tr, nil, accounts.GroupVersion().WithKind("TokenRequest"), "ns", "robot", accounts, "token", admission.Create, nil, false, nodeA)
		err := p.Validate(context.Background(), attrs, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want admitted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a 403 saying %q", tc.name, err, tc.want)
		}
		if read != tc.wantRead {
			t.Errorf("%s: read through the API = %v, want %v", tc.name, read, tc.wantRead)
		}
	}
}
