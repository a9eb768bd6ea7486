package chain

import (
	"reflect"
	"strings"
)

// The kinds a Ref names most often: the ones the API server's seam follows and rayctl trace accepts.
const (
	KindPod        = "Pod"
	KindService    = "Service"
	KindJob        = "Job"
	KindRayCluster = "RayCluster"
	KindRayJob     = "RayJob"
	KindRayService = "RayService"
	// KindGateway and KindHTTPRoute are the Gateway API's (with `rayctl up --gateway-api`): a RayService's
	// incremental upgrade writes its HTTPRoute, and rayctl's Gateway controller programs the Gateway.
	KindGateway   = "Gateway"
	KindHTTPRoute = "HTTPRoute"
)

// followed are the kinds of the constants above, with their API resource and the names users type
// for them besides the kind and the resource (kubectl's short names).
var followed = []struct {
	kind, resource string
	short          []string
}{
	{KindRayJob, "rayjobs", nil},
	{KindRayService, "rayservices", nil},
	{KindRayCluster, "rayclusters", nil},
	{KindPod, "pods", []string{"po"}},
	{KindService, "services", []string{"svc"}},
	{KindJob, "jobs", nil},
	{KindGateway, "gateways", nil},
	{KindHTTPRoute, "httproutes", nil},
}

// KindOf names the kind of a Kubernetes object after its Go type (*corev1.Pod is a "Pod"), as a
// controller's cache holds it (typed objects carry no TypeMeta there). It returns "" for nil.
func KindOf(obj any) string {
	v := reflect.ValueOf(obj)
	if !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return ""
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// KindOfResource names the kind of an API resource ("pods" is a "Pod"), as the API server's audit
// events name it: a followed kind by its resource, any other the resource without its plural s.
func KindOfResource(resource string) string {
	for _, k := range followed {
		if k.resource == resource {
			return k.kind
		}
	}
	return strings.TrimSuffix(resource, "s")
}

// ParseKind reads a followed kind as users type it, in any case: the kind ("rayjob"), its resource
// ("rayjobs") or kubectl's short name ("po", "svc"). ok is false for any other word.
func ParseKind(s string) (kind string, ok bool) {
	s = strings.ToLower(s)
	for _, k := range followed {
		if s == strings.ToLower(k.kind) || s == k.resource {
			return k.kind, true
		}
		for _, short := range k.short {
			if s == short {
				return k.kind, true
			}
		}
	}
	return "", false
}
