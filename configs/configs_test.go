package configs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/configs"
)

// TestCRDs checks that the embedded CRDs are the ray.io/v1 and Gateway API kinds, each serving v1, and that each one passes the API server's CustomResourceDefinition validation (structural schema
// and CEL rules included).
func TestCRDs(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)

	files, err := fs.Glob(configs.CRDs, "crds/*.json")
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]string{"RayCluster": "ray.io", "RayJob": "ray.io", "RayService": "ray.io", "RayCronJob": "ray.io",
		"GatewayClass": gatewayGroup, "Gateway": gatewayGroup, "HTTPRoute": gatewayGroup, "GRPCRoute": gatewayGroup, "ReferenceGrant": gatewayGroup}
	want := map[string]bool{}
	for kind := range groups {
		want[kind] = false
	}
	for _, name := range files {
		data, err := configs.CRDs.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		crd, err := configs.DecodeCRD(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		group, ok := groups[crd.Spec.Names.Kind]
		if !ok {
			t.Errorf("%s: unexpected kind %s", name, crd.Spec.Names.Kind)
		}
		if v1 := servedV1(crd); crd.Spec.Group != group || v1 == nil || (group == "ray.io" && (len(crd.Spec.Versions) != 1 || !v1.Storage)) {
			t.Errorf("%s: want group %s serving v1 (ray.io: v1 only, stored), got %s with %d versions", name, group, crd.Spec.Group, len(crd.Spec.Versions))
		}
		want[crd.Spec.Names.Kind] = true

		scheme.Default(crd)
		internal := &apiextensions.CustomResourceDefinition{}
		if err := scheme.Convert(crd, internal, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if errs := validation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
			t.Errorf("%s: %v", name, errs.ToAggregate())
		}
	}
	for kind, found := range want {
		if !found {
			t.Errorf("no CRD for %s", kind)
		}
	}
}

// gatewayGroup is the Gateway API's group.
const gatewayGroup = configs.GatewayGroup

// TestCRDManifestsByGroup: the manifests asked for are those of the groups named, and only those.
func TestCRDManifestsByGroup(t *testing.T) {
	for _, tc := range []struct {
		groups []string
		want   map[string]int
	}{
		{[]string{configs.RayGroup}, map[string]int{configs.RayGroup: 4}},
		{[]string{configs.RayGroup, configs.GatewayGroup}, map[string]int{configs.RayGroup: 4, configs.GatewayGroup: 5}},
		{nil, map[string]int{}},
	} {
		manifests, err := configs.CRDManifests(tc.groups...)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, m := range manifests {
			crd, err := configs.DecodeCRD(m)
			if err != nil {
				t.Fatal(err)
			}
			got[crd.Spec.Group]++
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("CRDManifests(%v): groups %v, want %v", tc.groups, got, tc.want)
		}
	}
}

// servedV1 is crd's version v1 when it is served (ReferenceGrant serves v1 but still stores v1beta1).
func servedV1(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i, v := range crd.Spec.Versions {
		if v.Name == "v1" && v.Served {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

// TestCRDCount counts what CRDManifests returns, group by group.
func TestCRDCount(t *testing.T) {
	for _, groups := range [][]string{{configs.RayGroup}, {configs.GatewayGroup}, {configs.RayGroup, configs.GatewayGroup}, {"example.com"}} {
		manifests, err := configs.CRDManifests(groups...)
		if err != nil {
			t.Fatal(err)
		}
		if n := configs.CRDCount(groups...); n != len(manifests) {
			t.Errorf("CRDCount(%v) = %d, CRDManifests gives %d", groups, n, len(manifests))
		}
	}
	if n := configs.CRDCount(configs.RayGroup); n != 4 {
		t.Errorf("CRDCount(ray.io) = %d, want KubeRay's 4", n)
	}
}

// TestDecodeCRD: JSON and YAML manifests decode to the same CRD; an unknown field or a field given
// twice is refused in either.
func TestDecodeCRD(t *testing.T) {
	j := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com"}}`
	y := "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n"
	for _, m := range []string{j, y, "\n  " + j} {
		crd, err := configs.DecodeCRD([]byte(m))
		if err != nil || crd.Name != "widgets.example.com" || crd.Spec.Group != "example.com" {
			t.Errorf("DecodeCRD(%q) = %+v, %v", m, crd, err)
		}
	}
	for _, bad := range []string{
		`{"metadata":{"name":"a"},"spec":{"grop":"example.com"}}`,
		`{"metadata":{"name":"a","name":"b"}}`,
		"metadata:\n  name: a\nspec:\n  grop: example.com\n",
		"metadata:\n  name: a\n  name: b\n",
		`{"metadata":`,
	} {
		if crd, err := configs.DecodeCRD([]byte(bad)); err == nil {
			t.Errorf("DecodeCRD(%q) = %+v, no error", bad, crd)
		}
	}
}

// TestCRDsCompact: the files are compact JSON, as hack/crdfile writes them (indented, the whitespace
// would reach the CRDs' raw JSON fields, and every stored CRD's hash would change).
func TestCRDsCompact(t *testing.T) {
	files, err := fs.Glob(configs.CRDs, "crds/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs (%v)", err)
	}
	for _, name := range files {
		data, err := configs.CRDs.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(append(compact.Bytes(), '\n'), data) {
			t.Errorf("%s is not compact JSON ending in a newline (regenerate with make generate)", name)
		}
	}
}
