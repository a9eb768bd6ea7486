package node_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/rayctl/rayctl/pkg/apiserver/auth/node"
)

// podsOn is a fixed set of pods.
type podsOn []corev1.Pod

func (p podsOn) OnNode(_ context.Context, ns, n string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for i := range p {
		if p[i].Namespace == ns && p[i].Spec.NodeName == n {
			out = append(out, &p[i])
		}
	}
	return out, nil
}

func TestNodeReadsOnlyWhatItsPodsUse(t *testing.T) {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{
			NodeName:           "a",
			ServiceAccountName: "robot",
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
				{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				}}}},
			},
			InitContainers: []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-env"}}}}}},
			Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-cm"}, Key: "k"},
			}}}}},
		},
	}
	a := node.New(podsOn{pod})
	nodeA := &user.DefaultInfo{Name: "system:node:a", Groups: []string{"system:nodes", "system:authenticated"}}
	nodeB := &user.DefaultInfo{Name: "system:node:b", Groups: []string{"system:nodes", "system:authenticated"}}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}
	for _, tc := range []struct {
		u                        user.Info
		verb, resource, ns, name string
		want                     authorizer.Decision
		why                      string
	}{
		{nodeA, "get", "secrets", "ns", "vol-secret", authorizer.DecisionAllow, `pod ns/p on node "a" uses secret "vol-secret"`},
		{nodeA, "get", "secrets", "ns", "pull", authorizer.DecisionAllow, ""},
		{nodeA, "get", "secrets", "ns", "init-env", authorizer.DecisionAllow, ""},
		{nodeA, "watch", "secrets", "ns", "vol-secret", authorizer.DecisionAllow, ""},
		{nodeA, "get", "configmaps", "ns", "vol-cm", authorizer.DecisionAllow, ""},
		{nodeA, "get", "configmaps", "ns", "kube-root-ca.crt", authorizer.DecisionAllow, ""},
		{nodeA, "get", "configmaps", "ns", "env-cm", authorizer.DecisionAllow, ""},
		{nodeA, "get", "serviceaccounts", "ns", "robot", authorizer.DecisionAllow, ""},
		{nodeA, "get", "secrets", "ns", "other", authorizer.DecisionDeny, `no pod bound to node "a" in namespace "ns" uses secret "other"`},
		{nodeA, "get", "secrets", "elsewhere", "vol-secret", authorizer.DecisionDeny, ""},
		{nodeA, "list", "secrets", "", "", authorizer.DecisionDeny, "one by name, not list them all"},
		{nodeA, "watch", "configmaps", "ns", "", authorizer.DecisionDeny, "one by name"},
		{nodeA, "update", "secrets", "ns", "vol-secret", authorizer.DecisionDeny, "may only read secrets, not update them"},
		{nodeB, "get", "secrets", "ns", "vol-secret", authorizer.DecisionDeny, `no pod bound to node "b"`},
		{nodeB, "get", "serviceaccounts", "ns", "robot", authorizer.DecisionDeny, ""},
		{nodeA, "get", "pods", "ns", "p", authorizer.DecisionNoOpinion, ""},
		{admin, "get", "secrets", "ns", "other", authorizer.DecisionNoOpinion, ""},
	} {
		attrs := authorizer.AttributesRecord{User: tc.u, Verb: tc.verb, Resource: tc.resource, Namespace: tc.ns, Name: tc.name, ResourceRequest: true, APIVersion: "v1"}
		got, why, err := a.Authorize(context.Background(), attrs)
		if err != nil {
			t.Errorf("%s %s %s %s/%s: %v", tc.u.GetName(), tc.verb, tc.resource, tc.ns, tc.name, err)
		}
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s %s %s %s/%s = %v (%q), want %v (%q)", tc.u.GetName(), tc.verb, tc.resource, tc.ns, tc.name, got, why, tc.want, tc.why)
		}
	}
}

func TestNodeRequestsTokensOnlyForItsPodsAccounts(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{NodeName: "a", ServiceAccountName: "robot"}}
	a := node.New(podsOn{pod})
	nodeA := &user.DefaultInfo{Name: "system:node:a", Groups: []string{"system:nodes"}}
	nodeB := &user.DefaultInfo{Name: "system:node:b", Groups: []string{"system:nodes"}}
	for _, tc := range []struct {
		u          user.Info
		verb, name string
		want       authorizer.Decision
	}{
		{nodeA, "create", "robot", authorizer.DecisionAllow},
		{nodeA, "create", "default", authorizer.DecisionDeny},
		{nodeA, "get", "robot", authorizer.DecisionDeny},
		{nodeB, "create", "robot", authorizer.DecisionDeny},
	} {
		attrs := authorizer.AttributesRecord{User: tc.u, Verb: tc.verb, Resource: "serviceaccounts", Subresource: "token",
			Namespace: "ns", Name: tc.name, ResourceRequest: true, APIVersion: "v1"}
		if got, why, err := a.Authorize(context.Background(), attrs); err != nil || got != tc.want {
			t.Errorf("%s %s serviceaccounts/%s/token: %v (%s, %v), want %v", tc.u.GetName(), tc.verb, tc.name, got, why, err, tc.want)
		}
	}
}

// failing is a source that cannot answer.
type failing struct{}

func (failing) OnNode(context.Context, string, string) ([]*corev1.Pod, error) {
	return nil, errors.New("no answer")
}

// A pod the first source (a cache) has not seen yet is found in the next (the API server); a source
// that fails is passed over; only when no source shows a pod using the object is the read denied.
func TestSourcesAreAskedInOrder(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}, Spec: corev1.PodSpec{NodeName: "a",
		Volumes: []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}}
	nodeA := &user.DefaultInfo{Name: "system:node:a", Groups: []string{"system:nodes"}}
	get := func(name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: nodeA, Verb: "get", Resource: "configmaps", Namespace: "ns", Name: name, ResourceRequest: true}
	}
	for _, tc := range []struct {
		what    string
		a       *node.Authorizer
		name    string
		want    authorizer.Decision
		wantErr bool // never: a deny carries its reason, not an error (which the API server turns into a 500)
	}{
		{"cache behind, API has it", node.New(podsOn{}, podsOn{pod}), "cm", authorizer.DecisionAllow, false},
		{"cache fails, API has it", node.New(failing{}, podsOn{pod}), "cm", authorizer.DecisionAllow, false},
		{"no source uses it", node.New(podsOn{pod}, podsOn{pod}), "other", authorizer.DecisionDeny, false},
		{"every source fails", node.New(failing{}, failing{}), "cm", authorizer.DecisionDeny, false},
	} {
		d, _, err := tc.a.Authorize(context.Background(), get(tc.name))
		if d != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: got %v, %v; want %v (error %v)", tc.what, d, err, tc.want, tc.wantErr)
		}
	}
}

// When no source can list the node's pods, the node's read is refused as any other it may not make:
// 403 Forbidden with the reason, through the API server's own authorization filter, not a 500.
func TestAReadThatCannotBeDecidedIsForbidden(t *testing.T) {
	reached := false
	h := filters.WithAuthorization(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }),
		node.New(failing{}, failing{}), scheme.Codecs)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps/cm", nil)
	ctx := request.WithUser(req.Context(), &user.DefaultInfo{Name: "system:node:a", Groups: []string{"system:nodes"}})
	ctx = request.WithRequestInfo(ctx, &request.RequestInfo{IsResourceRequest: true, Path: req.URL.Path, Verb: "get",
		APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "configmaps", Name: "cm"})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(ctx))
	if reached || rec.Code != http.StatusForbidden {
		t.Fatalf("status %d (handler reached: %v), want 403:\n%s", rec.Code, reached, rec.Body)
	}
	if want := `the pods of node \"a\" in namespace \"ns\" could not be listed`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("the refusal does not say why (%s):\n%s", want, rec.Body)
	}
}
