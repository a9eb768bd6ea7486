package lazyopenapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	openapiv3controller "k8s.io/apiextensions-apiserver/pkg/controller/openapiv3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/rayctl/rayctl/configs"
)

const rayV1 = "apis/ray.io/v1"

// TestCustomResourceDocumentsAsApiextensionsServes runs apiextensions' own OpenAPI v3 controller and
// ServeCustomResources on one CRD informer (rayctl's Ray CRDs) and requires the same /openapi/v3 bytes
// from both, through a CRD's change, a CRD's deletion, a CRD not yet Established and the last CRD of a
// group version going; and that nothing is built until asked for, and nothing twice.
func TestCustomResourceDocumentsAsApiextensionsServes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	crds := rayCRDs(t)
	client := fake.NewClientset()
	for _, crd := range crds {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := externalversions.NewSharedInformerFactory(client, 0)
	informer := factory.Apiextensions().V1().CustomResourceDefinitions()
	eager, eagerMux := newV3Service(t)
	lazy, lazyMux := newV3Service(t)
	if err := ServeCustomResources(lazy, informer.Informer()); err != nil {
		t.Fatal(err)
	}
	upstream := openapiv3controller.NewController(informer)
	factory.Start(ctx.Done())
	go upstream.Run(eager, ctx.Done())

	before := crdDocumentsBuilt.Load()
	// apiextensions' controller publishes the group version after each CRD it builds: wait for all.
	awaitDocuments(t, "apiextensions' controller serving every Ray CRD", func() bool {
		if _, listed := v3Paths(t, eagerMux)[rayV1]; !listed || !informer.Informer().HasSynced() {
			return false
		}
		doc := get3(t, eagerMux, rayV1)
		for _, crd := range crds {
			if !bytes.Contains(doc, []byte(`"`+crd.Spec.Names.Kind+`"`)) {
				return false
			}
		}
		return true
	})
	if n := crdDocumentsBuilt.Load() - before; n != 0 {
		t.Fatalf("%d documents built before anyone asked for one", n)
	}
	same(t, eagerMux, lazyMux)
	if n := crdDocumentsBuilt.Load() - before; n != int64(len(crds)) {
		t.Fatalf("serving ray.io/v1 built %d CRD documents, want %d (one per CRD)", n, len(crds))
	}
	same(t, eagerMux, lazyMux)
	if n := crdDocumentsBuilt.Load() - before; n != int64(len(crds)) {
		t.Fatalf("serving ray.io/v1 again built documents anew: %d builds", n)
	}

	// A CRD's schema changes: both serve the new description.
	changed := crds[0].DeepCopy()
	changed.ResourceVersion = "2"
	changed.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "changed by the test"
	update(t, client, changed)
	awaitBoth(t, eagerMux, lazyMux, "the changed description", func(doc []byte) bool {
		return bytes.Contains(doc, []byte("changed by the test"))
	})

	// A CRD created but not Established, then another deleted: neither is served. (The deletion comes
	// second so that once both show it, both have seen the creation too: one informer, in order.)
	gone := crds[1]
	pending := crds[1].DeepCopy()
	pending.Name, pending.UID, pending.ResourceVersion = "pending."+pending.Spec.Group, "pending", "3"
	pending.Spec.Names.Kind, pending.Spec.Names.Plural, pending.Spec.Names.ListKind = "Pending", "pending", "PendingList"
	pending.Spec.Names.Singular, pending.Spec.Names.ShortNames = "pending", nil
	pending.Status.Conditions = nil
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kind := gone.Spec.Names.Kind
	awaitBoth(t, eagerMux, lazyMux, kind+" gone", func(doc []byte) bool {
		return !bytes.Contains(doc, []byte(`"`+kind+`"`))
	})
	if doc := get3(t, lazyMux, rayV1); bytes.Contains(doc, []byte("/pending")) {
		t.Error("a CRD that is not Established is served")
	}

	// Once Established it is served; then every CRD of the group version goes, and so does its document.
	pending.Status.Conditions = crds[0].Status.Conditions
	pending.ResourceVersion = "4"
	update(t, client, pending)
	awaitBoth(t, eagerMux, lazyMux, "the Established CRD", func(doc []byte) bool {
		return bytes.Contains(doc, []byte("/pending"))
	})
	for _, name := range []string{crds[0].Name, crds[2].Name, crds[3].Name, pending.Name} {
		if err := client.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	awaitDocuments(t, "ray.io/v1 gone from both", func() bool {
		_, eagerLists := v3Paths(t, eagerMux)[rayV1]
		_, lazyLists := v3Paths(t, lazyMux)[rayV1]
		return !eagerLists && !lazyLists
	})
	sameBytes(t, "/openapi/v3", get3(t, eagerMux, ""), get3(t, lazyMux, ""))
}

// rayCRDs are rayctl's Ray CRDs, Established, each with a UID and a resourceVersion.
func rayCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	manifests, err := configs.CRDManifests("ray.io")
	if err != nil {
		t.Fatal(err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, m := range manifests {
		crd, err := configs.DecodeCRD(m)
		if err != nil {
			t.Fatal(err)
		}
		crd.UID, crd.ResourceVersion = types.UID(crd.Name), "1"
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
		}
		out = append(out, crd)
	}
	if len(out) < 4 {
		t.Fatalf("%d Ray CRDs, want at least 4", len(out))
	}
	return out
}

func update(t *testing.T, client *fake.Clientset, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Update(context.Background(), crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// newV3Service is an empty /openapi/v3 service and the mux it serves on.
func newV3Service(t *testing.T) (*handler3.OpenAPIService, *mux.PathRecorderMux) {
	t.Helper()
	service, m := handler3.NewOpenAPIService(), mux.NewPathRecorderMux("test")
	if err := service.RegisterOpenAPIV3VersionedService("/openapi/v3", m); err != nil {
		t.Fatal(err)
	}
	return service, m
}

// get3 is the body of /openapi/v3/gv ("": the discovery document) as m serves it.
func get3(t *testing.T, m http.Handler, gv string) []byte {
	t.Helper()
	path := "/openapi/v3"
	if gv != "" {
		path += "/" + gv
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Accept", "application/json")
	m.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes()
}

// v3Paths are the group versions m's discovery document lists.
func v3Paths(t *testing.T, m http.Handler) map[string]json.RawMessage {
	t.Helper()
	var discovery struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(get3(t, m, ""), &discovery); err != nil {
		t.Fatal(err)
	}
	return discovery.Paths
}

// same requires the same discovery document and ray.io/v1 document from both.
func same(t *testing.T, eager, lazy http.Handler) {
	t.Helper()
	sameBytes(t, "/openapi/v3/"+rayV1, get3(t, lazy, rayV1), get3(t, eager, rayV1))
	sameBytes(t, "/openapi/v3", get3(t, lazy, ""), get3(t, eager, ""))
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from apiextensions' own:\n got %.400s\nwant %.400s", what, got, want)
	}
}

// awaitBoth waits until both serve a ray.io/v1 document that shows what (apiextensions' controller
// works through a queue of its own), then requires the same bytes.
func awaitBoth(t *testing.T, eager, lazy http.Handler, what string, shows func([]byte) bool) {
	t.Helper()
	awaitDocuments(t, what, func() bool {
		_, eagerLists := v3Paths(t, eager)[rayV1]
		_, lazyLists := v3Paths(t, lazy)[rayV1]
		return eagerLists && lazyLists && shows(get3(t, eager, rayV1)) && shows(get3(t, lazy, rayV1))
	})
	same(t, eager, lazy)
}

func awaitDocuments(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", strings.TrimSpace(what), err)
	}
}

// TestConflictingDocumentsLeftOut: two CRDs of a group version whose kinds were edited to the same name
// (their documents conflict) do not make the group version's document fail, which would fail the
// discovery document of every group version: the first is kept, the other left out.
func TestConflictingDocumentsLeftOut(t *testing.T) {
	crds := rayCRDs(t)
	first, err := builder.BuildOpenAPIV3(crds[0], "v1", builder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	twin := crds[0].DeepCopy()
	twin.Name = "twin." + twin.Spec.Group
	twin.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "a different schema under the same kind"
	second, err := builder.BuildOpenAPIV3(twin, "v1", builder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := builder.MergeSpecsV3(first, second); err == nil {
		t.Fatal("the two documents merge: the test needs a conflict")
	}
	merged := mergeDocuments([]*spec3.OpenAPI{first, second}, "v1")
	want, err := builder.MergeSpecsV3(first)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(merged)
	wantJSON, _ := json.Marshal(want)
	sameBytes(t, "the merged document", got, wantJSON)
}
