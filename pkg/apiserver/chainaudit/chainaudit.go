// Package chainaudit is the API server's seam of the trigger chain: an audit policy that follows the
// writes controllers and the kubelet make, the lists and watches that fill their caches and the
// requests they proxy to Services and Pods, and an audit backend that turns each into a chain event
// (APIWrite, APIRead, ProxyCall) for a chain.Sink. What crosses the API server is seen whoever the
// client is: rayctl's controllers, or an operator outside rayctl such as KubeRay's.
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
	{Group: "ray.io", Resources: []string{"rayclusters", "rayclusters/status", "rayjobs", "rayjobs/status", "rayservices", "rayservices/status"}},
	{Group: "gateway.networking.k8s.io", Resources: []string{"gateways", "gateways/status", "httproutes", "httproutes/status"}},
}

// readResources are the lists and watches the chain follows: what a Ray operator's cache holds.
var readResources = []auditinternal.GroupResources{
	{Group: "", Resources: []string{"pods", "services"}},
	{Group: "batch", Resources: []string{"jobs"}},
	{Group: "ray.io", Resources: []string{"rayclusters", "rayjobs", "rayservices"}},
}

// proxyResources are the proxy subresources the chain follows: an operator's way to the dashboard.
var proxyResources = []auditinternal.GroupResources{{Group: "", Resources: []string{"services/proxy", "pods/proxy"}}}

// Policy is the API server's audit policy for the chain: writes to the followed resources at
// RequestResponse (the response carries the new resourceVersion) once the response is complete; lists
// when answered and watches when opened, and proxied requests when complete, at Metadata; everything
// else not at all.
func Policy() audit.PolicyRuleEvaluator {
	complete := []auditinternal.Stage{auditinternal.StageRequestReceived, auditinternal.StageResponseStarted}
	return auditpolicy.NewPolicyRuleEvaluator(&auditinternal.Policy{
		OmitManagedFields: true,
		Rules: []auditinternal.PolicyRule{
			{Level: auditinternal.LevelRequestResponse, Verbs: []string{"create", "update", "patch", "delete"}, Resources: auditedResources, OmitStages: complete},
			{Level: auditinternal.LevelMetadata, Resources: proxyResources, OmitStages: complete},
			// A watch's ResponseStarted is its opening; a list has only ResponseComplete.
			{Level: auditinternal.LevelMetadata, Verbs: []string{"list", "watch"}, Resources: readResources,
				OmitStages: []auditinternal.Stage{auditinternal.StageRequestReceived}},
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
		if ev.ObjectRef == nil {
			continue
		}
		complete := ev.Stage == auditinternal.StageResponseComplete || ev.Stage == auditinternal.StagePanic
		switch {
		case ev.ObjectRef.Subresource == "proxy":
			if complete {
				b.sink.Record(proxyCall(ev))
			}
		case ev.Verb == "watch":
			if ev.Stage == auditinternal.StageResponseStarted {
				b.sink.Record(apiRead(ev))
			}
		case ev.Verb == "list":
			if complete {
				b.sink.Record(apiRead(ev))
			}
		case complete:
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
	Status map[string]any `json:"status"`
}

// statusFields are the fields of each kind's status a write's event carries: what a reader of a
// chain drawn from the API server's side (an operator outside rayctl) wants to see change.
var statusFields = map[string][]string{
	chain.KindRayCluster: {"state", "readyWorkerReplicas"},
	chain.KindRayJob:     {"jobDeploymentStatus", "jobStatus"},
	chain.KindRayService: {"serviceStatus"},
	chain.KindJob:        {"active", "succeeded", "failed"},
}

// summary is the fields of status statusFields names for kind, those set, in order.
func summary(kind string, status map[string]any) []chain.Field {
	var out []chain.Field
	for _, f := range statusFields[kind] {
		if v, ok := status[f]; ok && v != "" {
			out = append(out, chain.F(f, v))
		}
	}
	return out
}

// apiWrite is the APIWrite event of a completed write.
func apiWrite(ev *auditinternal.Event) chain.Event {
	o := ev.ObjectRef
	ref := chain.Ref{Kind: chain.KindOfResource(o.Resource), Namespace: o.Namespace, Name: o.Name, UID: string(o.UID)}
	call := &chain.Call{Verb: ev.Verb, Subresource: o.Subresource, User: ev.User.Username, UserAgent: ev.UserAgent}
	outcome := ev.Verb
	if o.Subresource != "" {
		outcome += " " + o.Subresource
	}
	e := chain.Event{Component: "apiserver", Hop: chain.APIWrite, Outcome: chain.Outcome(outcome), Call: call}
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
			e.Status = summary(ref.Kind, m.Status)
		}
	}
	if !ev.StageTimestamp.IsZero() && !ev.RequestReceivedTimestamp.IsZero() {
		e.Duration = ev.StageTimestamp.Sub(ev.RequestReceivedTimestamp.Time)
	}
	e.Object = ref
	return e
}

// apiRead is the APIRead event of an answered list or an opened watch.
func apiRead(ev *auditinternal.Event) chain.Event {
	o := ev.ObjectRef
	e := chain.Event{
		Component: "apiserver", Hop: chain.APIRead, Outcome: chain.Outcome(ev.Verb),
		Object: chain.Ref{Kind: chain.KindOfResource(o.Resource), Namespace: o.Namespace},
		Call:   &chain.Call{Verb: ev.Verb, User: ev.User.Username, UserAgent: ev.UserAgent, URL: ev.RequestURI, Code: statusCode(ev)},
	}
	if e.Call.Code >= 300 && ev.ResponseStatus != nil {
		e.Error, e.ErrorReason = ev.ResponseStatus.Message, string(ev.ResponseStatus.Reason)
	}
	return e
}

// proxyCall is the ProxyCall event of a completed services/proxy or pods/proxy request.
func proxyCall(ev *auditinternal.Event) chain.Event {
	o := ev.ObjectRef
	path := ev.RequestURI
	if i := strings.Index(path, "/proxy"); i >= 0 {
		path = path[i+len("/proxy"):]
	}
	e := chain.Event{
		Component: "apiserver", Hop: chain.ProxyCall,
		Object: chain.Ref{Kind: chain.KindOfResource(o.Resource), Namespace: o.Namespace, Name: o.Name},
		Call: &chain.Call{Method: methodOf(ev.Verb), URL: ev.RequestURI, Path: path, Code: statusCode(ev),
			Verb: ev.Verb, Subresource: o.Subresource, User: ev.User.Username, UserAgent: ev.UserAgent},
	}
	e.Outcome = chain.Outcome(e.Call.Method)
	if e.Call.Code >= 400 && ev.ResponseStatus != nil {
		e.Error = ev.ResponseStatus.Message
	}
	if !ev.StageTimestamp.IsZero() && !ev.RequestReceivedTimestamp.IsZero() {
		e.Duration = ev.StageTimestamp.Sub(ev.RequestReceivedTimestamp.Time)
	}
	return e
}

// statusCode is the response's status code (200 when the audit event carries none).
func statusCode(ev *auditinternal.Event) int {
	if ev.ResponseStatus != nil && ev.ResponseStatus.Code != 0 {
		return int(ev.ResponseStatus.Code)
	}
	return 200
}

// methodOf is the HTTP method of a request's verb, as the API server derived one from the other.
func methodOf(verb string) string {
	switch verb {
	case "create":
		return "POST"
	case "update":
		return "PUT"
	case "patch":
		return "PATCH"
	case "delete":
		return "DELETE"
	}
	return "GET"
}
