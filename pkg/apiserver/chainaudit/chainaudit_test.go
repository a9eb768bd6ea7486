package chainaudit

import (
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"

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
