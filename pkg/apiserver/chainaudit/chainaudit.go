// Package chainaudit is the API server's seam of the trigger chain: an audit policy that follows the
// writes controllers and the kubelet make, and an audit backend that turns each completed write into a
// chain.APIWrite event for a chain.Sink.
package chainaudit

import (
	"encoding/json"
	"strings"

	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	auditpolicy "k8s.io/apiserver/pkg/audit/policy"

	"github.com/rayctl/rayctl/pkg/chain"
)

// auditedResources are the writes the chain follows: the objects controllers watch and the status
// writes that move them.
var auditedResources = []auditinternal.GroupResources{
	{Group: "", Resources: []string{"pods", "pods/status", "services", "services/status"}},
	{Group: "batch", Resources: []string{"jobs", "jobs/status"}},
	{Group: "ray.io", Resources: []string{"rayclusters", "rayclusters/status", "rayjobs", "rayjobs/status"}},
}

// Policy is the API server's audit policy for the chain: writes to the followed resources at
// RequestResponse (the response carries the new resourceVersion), everything else not at all, and
// only at the stage the response is complete.
func Policy() audit.PolicyRuleEvaluator {
	return auditpolicy.NewPolicyRuleEvaluator(&auditinternal.Policy{
		OmitStages:        []auditinternal.Stage{auditinternal.StageRequestReceived, auditinternal.StageResponseStarted},
		OmitManagedFields: true,
		Rules: []auditinternal.PolicyRule{
			{Level: auditinternal.LevelRequestResponse, Verbs: []string{"create", "update", "patch", "delete"}, Resources: auditedResources},
			{Level: auditinternal.LevelNone},
		},
	})
}

// Backend returns the API server's audit backend that sends each completed write to sink as an
// APIWrite event. It never refuses an event (a refusal would fail the request).
func Backend(sink chain.Sink) audit.Backend { return auditBackend{sink} }

type auditBackend struct{ sink chain.Sink }

func (b auditBackend) ProcessEvents(events ...*auditinternal.Event) bool {
	for _, ev := range events {
		if ev.ObjectRef != nil && (ev.Stage == auditinternal.StageResponseComplete || ev.Stage == auditinternal.StagePanic) {
			b.sink.Record(apiWrite(ev))
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

// apiWrite is the APIWrite event of a completed write.
func apiWrite(ev *auditinternal.Event) chain.Event {
	o := ev.ObjectRef
	ref := chain.Ref{Kind: kindOf(o.Resource), Namespace: o.Namespace, Name: o.Name, UID: string(o.UID)}
	call := &chain.Call{Verb: ev.Verb, Subresource: o.Subresource, User: ev.User.Username}
	e := chain.Event{Component: "apiserver", Hop: chain.APIWrite, Outcome: ev.Verb, Call: call}
	if o.Subresource != "" {
		e.Outcome += " " + o.Subresource
	}
	if ev.ResponseStatus != nil {
		call.Code = int(ev.ResponseStatus.Code)
		if call.Code >= 300 {
			e.Error, e.ErrorReason = ev.ResponseStatus.Message, string(ev.ResponseStatus.Reason)
		}
	}
	if call.Code == 0 {
		call.Code = 200
	}
	if ev.ResponseObject != nil && call.Code < 300 {
		var m objectMeta
		if json.Unmarshal(ev.ResponseObject.Raw, &m) == nil && m.Kind != "Status" {
			ref.ResourceVersion = m.Metadata.ResourceVersion
			if ref.Name == "" {
				ref.Name = m.Metadata.Name
			}
			if m.Metadata.UID != "" {
				ref.UID = m.Metadata.UID
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
	return e
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
