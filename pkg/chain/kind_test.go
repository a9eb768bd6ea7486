package chain

import "testing"

// What users type for `rayctl trace` and `rayctl diagnose`: kubectl's names and short names.
func TestParseKindReadsKubectlNames(t *testing.T) {
	for in, want := range map[string]string{
		"rayjob": KindRayJob, "RayJobs": KindRayJob,
		"rayservice": KindRayService, "rayservices": KindRayService,
		"raycluster": KindRayCluster, "RAYCLUSTERS": KindRayCluster,
		"pod": KindPod, "pods": KindPod, "po": KindPod,
		"service": KindService, "services": KindService, "svc": KindService,
		"job": KindJob, "jobs": KindJob,
		"gateway": KindGateway, "httproutes": KindHTTPRoute, "HTTPRoute": KindHTTPRoute,
	} {
		if got, ok := ParseKind(in); !ok || got != want {
			t.Errorf("ParseKind(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "rj", "rc", "deployment", "node"} {
		if got, ok := ParseKind(in); ok {
			t.Errorf("ParseKind(%q) = %q; want not a followed kind", in, got)
		}
	}
}

func TestKindOfResourceAndObject(t *testing.T) {
	for res, want := range map[string]string{"pods": KindPod, "rayjobs": KindRayJob, "jobs": KindJob, "httproutes": KindHTTPRoute, "configmaps": "configmap"} {
		if got := KindOfResource(res); got != want {
			t.Errorf("KindOfResource(%q) = %q, want %q", res, got, want)
		}
	}
	type RayCluster struct{}
	var none *RayCluster
	if got := KindOf(&RayCluster{}); got != KindRayCluster {
		t.Errorf("KindOf(&RayCluster{}) = %q", got)
	}
	if got := KindOf(none); got != "" {
		t.Errorf("KindOf(nil pointer) = %q, want empty", got)
	}
	if got := KindOf(nil); got != "" {
		t.Errorf("KindOf(nil) = %q, want empty", got)
	}
}
