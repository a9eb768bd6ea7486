package chain

import (
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	auditpolicy "k8s.io/apiserver/pkg/audit/policy"
)

// auditedResources are the writes the chain follows: the objects controllers watch and the status
// writes that move them.
var auditedResources = []auditinternal.GroupResources{
	{Group: "", Resources: []string{"pods", "pods/status", "services", "services/status"}},
	{Group: "batch", Resources: []string{"jobs", "jobs/status"}},
	{Group: "ray.io", Resources: []string{"rayclusters", "rayclusters/status", "rayjobs", "rayjobs/status"}},
}

// AuditPolicy is the API server's audit policy for the chain: writes to the followed resources at
// RequestResponse (the response carries the new resourceVersion), everything else not at all, and
// only at the stage the response is complete.
func AuditPolicy() audit.PolicyRuleEvaluator {
	return auditpolicy.NewPolicyRuleEvaluator(&auditinternal.Policy{
		OmitStages:        []auditinternal.Stage{auditinternal.StageRequestReceived, auditinternal.StageResponseStarted},
		OmitManagedFields: true,
		Rules: []auditinternal.PolicyRule{
			{Level: auditinternal.LevelRequestResponse, Verbs: []string{"create", "update", "patch", "delete"}, Resources: auditedResources},
			{Level: auditinternal.LevelNone},
		},
	})
}

// AuditBackend returns the recorder as the API server's audit backend: each completed write becomes an
// APIWrite event. It never refuses an event (a refusal would fail the request).
func (r *Recorder) AuditBackend() audit.Backend { return auditBackend{r} }

type auditBackend struct{ r *Recorder }

func (b auditBackend) ProcessEvents(events ...*auditinternal.Event) bool {
	for _, ev := range events {
		if ev.Stage == auditinternal.StageResponseComplete || ev.Stage == auditinternal.StagePanic {
			b.r.apiWrite(ev)
		}
	}
	return true
}

func (auditBackend) Run(<-chan struct{}) error { return nil }
func (auditBackend) Shutdown()                 {}
func (auditBackend) String() string            { return "rayctl-chain" }

// objectMeta is the part of a response body the chain reads.
type objectMeta struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

func (r *Recorder) apiWrite(ev *auditinternal.Event) {
	if ev.ObjectRef == nil {
		return
	}
	o := ev.ObjectRef
	ref := Ref{Kind: kindOf(o.Resource), Namespace: o.Namespace, Name: o.Name, UID: o.UID}
	e := Event{Component: "apiserver", Hop: APIWrite, Outcome: ev.Verb, Detail: ev.User.Username}
	if o.Subresource != "" {
		e.Outcome += " " + o.Subresource
	}
	if ev.ResponseStatus != nil {
		e.Code = int(ev.ResponseStatus.Code)
		if e.Code >= 300 {
			e.Error = ev.ResponseStatus.Message
		}
	}
	if e.Code == 0 {
		e.Code = 200
	}
	if ev.ResponseObject != nil && e.Code < 300 {
		var m objectMeta
		if json.Unmarshal(ev.ResponseObject.Raw, &m) == nil && m.Kind != "Status" {
			ref.ResourceVersion = m.Metadata.ResourceVersion
			if ref.Name == "" {
				ref.Name = m.Metadata.Name
			}
			if m.Metadata.UID != "" {
				ref.UID = types.UID(m.Metadata.UID)
			}
			if m.Kind != "" {
				ref.Kind = m.Kind
			}
		}
	}
	if !ev.StageTimestamp.IsZero() && !ev.RequestReceivedTimestamp.IsZero() {
		e.Duration = ev.StageTimestamp.Sub(ev.RequestReceivedTimestamp.Time)
	}
	e.Object = ref
	r.record(e)
}

// kindOf names a followed resource's kind.
func kindOf(resource string) string {
	switch resource {
	case "pods":
		return "Pod"
	case "services":
		return "Service"
	case "jobs":
		return "Job"
	case "rayclusters":
		return "RayCluster"
	case "rayjobs":
		return "RayJob"
	}
	return strings.TrimSuffix(resource, "s")
}
