package chainaudit

import (
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
)

func TestAuditBackendRecordsAcceptedWrites(t *testing.T) {
	r := chain.New(10)
	b := Backend(r)
	received := metav1.NewMicroTime(time.Now().Add(-3 * time.Millisecond))
	ok := b.ProcessEvents(&auditinternal.Event{
		Stage: auditinternal.StageResponseComplete, Verb: "patch",
		User:           authnv1.UserInfo{Username: "system:node:vm"},
		ObjectRef:      &auditinternal.ObjectReference{Resource: "pods", Subresource: "status", Namespace: "ns", Name: "p"},
		ResponseStatus: &metav1.Status{Code: 200}, RequestReceivedTimestamp: received, StageTimestamp: metav1.NewMicroTime(time.Now()),
		ResponseObject: &runtime.Unknown{Raw: []byte(`{"kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"42"}}`)},
	}, &auditinternal.Event{
		Stage: auditinternal.StageResponseComplete, Verb: "update",
		ObjectRef:      &auditinternal.ObjectReference{Resource: "rayclusters", Subresource: "status", Namespace: "ns", Name: "c"},
		ResponseStatus: &metav1.Status{Code: 409, Message: "the object has been modified"},
	})
	if !ok {
		t.Fatal("the backend refused events (the request would fail)")
	}
	got := r.Events(chain.Filter{})
	if len(got) != 2 {
		t.Fatalf("recorded %+v", got)
	}
	if e := got[0]; e.Object.Kind != "Pod" || e.Object.ResourceVersion != "42" || e.Object.UID != "u1" || e.Outcome != "patch status" ||
		e.Call.User != "system:node:vm" || e.Call.Verb != "patch" || e.Call.Subresource != "status" || e.Duration < 3*time.Millisecond {
		t.Errorf("accepted write: %+v", e)
	}
	if e := got[1]; e.Call.Code != 409 || e.Object.Kind != "RayCluster" || !strings.Contains(render.Describe(&e), "refused") {
		t.Errorf("refused write: %+v (%s)", e, render.Describe(&e))
	}
}

func TestAuditBackendRecordsReadsAndProxiedCalls(t *testing.T) {
	r := chain.New(10)
	b := Backend(r)
	op := authnv1.UserInfo{Username: "kuberay-operator"}
	b.ProcessEvents(&auditinternal.Event{
		Stage: auditinternal.StageResponseStarted, Verb: "watch", User: op, UserAgent: "kuberay-operator/v1.6.2",
		ObjectRef: &auditinternal.ObjectReference{Resource: "rayjobs", APIGroup: "ray.io", Namespace: "team-b"},
	}, &auditinternal.Event{
		// A watch's end is not a new read.
		Stage: auditinternal.StageResponseComplete, Verb: "watch", User: op,
		ObjectRef: &auditinternal.ObjectReference{Resource: "rayjobs", APIGroup: "ray.io", Namespace: "team-b"},
	}, &auditinternal.Event{
		Stage: auditinternal.StageResponseComplete, Verb: "list", User: op, UserAgent: "kuberay-operator/v1.6.2",
		ObjectRef: &auditinternal.ObjectReference{Resource: "pods"}, ResponseStatus: &metav1.Status{Code: 200},
	}, &auditinternal.Event{
		Stage: auditinternal.StageResponseComplete, Verb: "get", User: op,
		RequestURI:     "/api/v1/namespaces/ns/services/rc-head-svc:dashboard/proxy/api/jobs/raysubmit_1",
		ObjectRef:      &auditinternal.ObjectReference{Resource: "services", Subresource: "proxy", Namespace: "ns", Name: "rc-head-svc:dashboard"},
		ResponseStatus: &metav1.Status{Code: 404},
	})
	got := r.Events(chain.Filter{})
	if len(got) != 3 {
		t.Fatalf("recorded %d events, want a watch, a list and a proxied call: %+v", len(got), got)
	}
	if e := got[0]; e.Hop != chain.APIRead || e.Outcome != "watch" || e.Object.Kind != "RayJob" || e.Object.Namespace != "team-b" ||
		e.Call.UserAgent != "kuberay-operator/v1.6.2" || render.Describe(&e) != "opened a watch of RayJobs in namespace team-b (kuberay-operator)" {
		t.Errorf("watch: %+v (%s)", e, render.Describe(&e))
	}
	if e := got[1]; e.Hop != chain.APIRead || render.Describe(&e) != "listed Pods in all namespaces (kuberay-operator)" {
		t.Errorf("list: %+v (%s)", e, render.Describe(&e))
	}
	if e := got[2]; e.Hop != chain.ProxyCall || e.Call.Method != "GET" || e.Call.Path != "/api/jobs/raysubmit_1" || e.Call.Code != 404 || e.Object.Kind != "Service" {
		t.Errorf("proxied call: %+v", e)
	}
}

func TestPolicyFollowsReadsWatchesAndProxies(t *testing.T) {
	p := Policy()
	for _, tc := range []struct {
		attrs auditAttrs
		level auditinternal.Level
		omit  []auditinternal.Stage
	}{
		{auditAttrs{verb: "watch", resource: "rayjobs", group: "ray.io"}, auditinternal.LevelMetadata, []auditinternal.Stage{auditinternal.StageRequestReceived}},
		{auditAttrs{verb: "get", resource: "services", sub: "proxy"}, auditinternal.LevelMetadata, []auditinternal.Stage{auditinternal.StageRequestReceived, auditinternal.StageResponseStarted}},
		{auditAttrs{verb: "update", resource: "rayjobs", sub: "status", group: "ray.io"}, auditinternal.LevelRequestResponse, nil},
		{auditAttrs{verb: "get", resource: "pods"}, auditinternal.LevelNone, nil},
		{auditAttrs{verb: "list", resource: "configmaps"}, auditinternal.LevelNone, nil},
	} {
		got := p.EvaluatePolicyRule(tc.attrs.attributes())
		if got.Level != tc.level {
			t.Errorf("%+v: level %s, want %s", tc.attrs, got.Level, tc.level)
		}
		for _, s := range tc.omit {
			if !slices.Contains(got.OmitStages, s) {
				t.Errorf("%+v: stage %s not omitted (%v)", tc.attrs, s, got.OmitStages)
			}
		}
	}
}

// auditAttrs is a resource request, for the policy.
type auditAttrs struct{ verb, group, resource, sub string }

func (a auditAttrs) attributes() authorizer.Attributes {
	return authorizer.AttributesRecord{Verb: a.verb, APIGroup: a.group, Resource: a.resource, Subresource: a.sub,
		ResourceRequest: true, User: &user.DefaultInfo{Name: "kuberay-operator"}}
}
