package openapi_test

import (
	"reflect"
	"sort"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/rayctl/rayctl/pkg/apiserver/openapi"
)

func definitions() map[string]struct{} {
	defs := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + name)
	})
	names := make(map[string]struct{}, len(defs))
	for name := range defs {
		names[name] = struct{}{}
	}
	return names
}

// TestDefinitionNames checks that definitions are keyed by the REST-friendly model
// names that runtime.Scheme and the API server's DefinitionNamer use.
func TestDefinitionNames(t *testing.T) {
	names := definitions()
	for _, want := range []string{
		"io.k8s.api.core.v1.Pod",
		"io.k8s.api.core.v1.Service",
		"io.k8s.api.batch.v1.Job",
		"io.k8s.api.coordination.v1.Lease",
		"io.k8s.api.discovery.v1.EndpointSlice",
		"io.k8s.api.events.v1.Event",
		"io.k8s.api.rbac.v1.ClusterRole",
		"io.k8s.api.policy.v1.Eviction",
		"io.k8s.api.autoscaling.v1.Scale",
		"io.k8s.api.authorization.v1.SubjectAccessReview",
		"io.k8s.api.authentication.v1.TokenReview",
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
		"io.k8s.apimachinery.pkg.apis.meta.v1.Status",
		"io.k8s.apimachinery.pkg.api.resource.Quantity",
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString",
		"io.k8s.apimachinery.pkg.runtime.RawExtension",
		"io.k8s.apimachinery.pkg.version.Info",
		"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
	} {
		if _, ok := names[want]; !ok {
			t.Errorf("definition %q missing", want)
		}
	}
	// The keys are the types' own OpenAPIModelName(), which is what
	// runtime.Scheme.ToOpenAPIDefinitionName returns.
	for _, m := range []interface{ OpenAPIModelName() string }{
		corev1.Pod{}, batchv1.Job{}, metav1.ObjectMeta{}, resource.Quantity{}, apiextensionsv1.CustomResourceDefinition{},
	} {
		if _, ok := names[m.OpenAPIModelName()]; !ok {
			t.Errorf("definition for %T (%q) missing", m, m.OpenAPIModelName())
		}
	}
}

// TestDependenciesResolve checks that every referenced definition is part of the set,
// so that building any schema from it cannot fail on a missing model.
func TestDependenciesResolve(t *testing.T) {
	defs := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + name)
	})
	for name, def := range defs {
		for _, dep := range def.Dependencies {
			if _, ok := defs[dep]; !ok {
				t.Errorf("%s depends on %s, which is not generated", name, dep)
			}
		}
	}
}

// TestPatchExtensions checks that list and patch metadata survived generation.
func TestPatchExtensions(t *testing.T) {
	defs := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + name)
	})
	containers := defs["io.k8s.api.core.v1.PodSpec"].Schema.Properties["containers"]
	for key, want := range map[string]interface{}{
		"x-kubernetes-list-type":       "map",
		"x-kubernetes-list-map-keys":   []interface{}{"name"},
		"x-kubernetes-patch-strategy":  "merge",
		"x-kubernetes-patch-merge-key": "name",
	} {
		if got := containers.Extensions[key]; !reflect.DeepEqual(got, want) {
			t.Errorf("PodSpec.containers %s = %#v, want %#v", key, got, want)
		}
	}
	conditions := defs["io.k8s.api.core.v1.PodStatus"].Schema.Properties["conditions"]
	if got := conditions.Extensions["x-kubernetes-patch-merge-key"]; got != "type" {
		t.Errorf("PodStatus.conditions patch merge key = %#v, want \"type\"", got)
	}
	if got := defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].Schema.Properties["ownerReferences"].Extensions["x-kubernetes-list-type"]; got != "map" {
		t.Errorf("ObjectMeta.ownerReferences list type = %#v, want \"map\"", got)
	}
	if got := defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"].Schema.Format; got != "int-or-string" {
		t.Errorf("IntOrString format = %q, want \"int-or-string\"", got)
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, batchv1.AddToScheme, rbacv1.AddToScheme, coordinationv1.AddToScheme,
		eventsv1.AddToScheme, discoveryv1.AddToScheme, authorizationv1.AddToScheme,
		authenticationv1.AddToScheme, autoscalingv1.AddToScheme, policyv1.AddToScheme,
		apiextensionsv1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

// resourceNames returns the model names of every kind in the scheme that has a definition,
// the way the generic API server asks for them when it installs a group.
func resourceNames(t *testing.T, s *runtime.Scheme) []string {
	t.Helper()
	have := definitions()
	seen := map[string]bool{}
	var names []string
	for gvk := range s.AllKnownTypes() {
		name, err := s.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			t.Fatalf("ToOpenAPIDefinitionName(%v): %v", gvk, err)
		}
		if _, ok := have[name]; !ok || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// TestTypeConverter builds the structured-merge-diff type converter the way
// GenericAPIServer.InstallAPIGroup does (OpenAPI v3 schemas → managedfields.NewTypeConverter),
// so server-side apply cannot fail at start-up, and checks objects of each group convert.
func TestTypeConverter(t *testing.T) {
	s := testScheme(t)
	namer := apiopenapi.NewDefinitionNamer(s)
	names := resourceNames(t, s)

	v3 := genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	schemas, err := builder3.BuildOpenAPIDefinitionsForResources(v3, names...)
	if err != nil {
		t.Fatalf("building OpenAPI v3 definitions: %v", err)
	}
	tc, err := managedfields.NewTypeConverter(schemas, false)
	if err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}

	// The v2 path (/openapi/v2) must build from the same definitions too.
	if _, err := builder.BuildOpenAPIDefinitionsForResources(genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer), names...); err != nil {
		t.Fatalf("building OpenAPI v2 definitions: %v", err)
	}

	objects := []runtime.Object{
		&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray"}}}},
		&corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "gcs", Port: 6379, Protocol: corev1.ProtocolTCP}}}},
		&corev1.Node{}, &corev1.Namespace{}, &corev1.ConfigMap{Data: map[string]string{"a": "b"}},
		&batchv1.Job{}, &coordinationv1.Lease{}, &eventsv1.Event{}, &discoveryv1.EndpointSlice{},
		&rbacv1.ClusterRole{}, &policyv1.PodDisruptionBudget{}, &autoscalingv1.Scale{},
		&apiextensionsv1.CustomResourceDefinition{},
	}
	for _, obj := range objects {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			t.Fatalf("ObjectKinds(%T): %v", obj, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		if _, err := tc.ObjectToTyped(obj); err != nil {
			t.Errorf("ObjectToTyped(%v): %v", gvks[0], err)
		}
	}

	// Containers merge by name (list-type map), as server-side apply needs.
	podGVK := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	typed := func(names ...string) *corev1.Pod {
		p := &corev1.Pod{}
		p.SetGroupVersionKind(podGVK)
		for _, n := range names {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: n})
		}
		return p
	}
	a, err := tc.ObjectToTyped(typed("head"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tc.ObjectToTyped(typed("sidecar"))
	if err != nil {
		t.Fatal(err)
	}
	merged, err := a.Merge(b)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	out, err := tc.TypedToObject(merged)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedSlice(u, "spec", "containers")
	if len(got) != 2 {
		t.Errorf("merged pod has %d containers, want 2 (containers should merge by name): %v", len(got), got)
	}
}
