package lazyopenapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	restclient "k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kube-openapi/pkg/common"

	rayopenapi "github.com/rayctl/rayctl/pkg/apiserver/openapi"
)

// TestSameDocumentsBuiltLater serves the same two API groups (the core group's configmaps, and
// coordination.k8s.io's leases, whose document lists the kinds every group shares) from a server that
// builds its OpenAPI documents in PrepareRun, as k8s.io/apiserver does, and from one that installs them
// here: nothing is built until asked for, and then every document is the same.
func TestSameDocumentsBuiltLater(t *testing.T) {
	eager := newServer(t, false)
	lazy := newServer(t, true)
	if lazy.StaticOpenAPISpec == nil || lazy.OpenAPIVersionedService == nil {
		t.Fatal("the services apiextensions' OpenAPI v2 controller uses are not set")
	}
	if lazy.OpenAPIV3VersionedService != nil {
		t.Fatal("OpenAPIV3VersionedService is set: apiextensions would build every CRD's v3 document at start")
	}
	if lazy.StaticOpenAPISpec.Paths != nil {
		t.Fatal("the v2 document was built before anyone asked for it")
	}

	v2 := get(t, lazy, "/openapi/v2")
	if lazy.StaticOpenAPISpec.Paths == nil || len(lazy.StaticOpenAPISpec.Definitions) == 0 {
		t.Error("serving /openapi/v2 did not fill the static spec apiextensions merges custom resources into")
	}
	sameJSON(t, "/openapi/v2", v2, get(t, eager, "/openapi/v2"))

	var discovery struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(get(t, lazy, "/openapi/v3"), &discovery); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "/openapi/v3", get(t, lazy, "/openapi/v3"), get(t, eager, "/openapi/v3"))
	for _, gv := range []string{"api/v1", "apis/coordination.k8s.io/v1"} {
		if _, ok := discovery.Paths[gv]; !ok {
			t.Errorf("/openapi/v3 lists no %s: %v", gv, discovery.Paths)
		}
		sameJSON(t, "/openapi/v3/"+gv, get(t, lazy, "/openapi/v3/"+gv), get(t, eager, "/openapi/v3/"+gv))
	}
}

// TestSharedKindsNarrowed: a group version's document lists, for the kinds every group shares, only
// its own group version and the core group's (not batch/v1, which the scheme has too).
func TestSharedKindsNarrowed(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				GVKs []map[string]string `json:"x-kubernetes-group-version-kind"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(get(t, newServer(t, true), "/openapi/v3/apis/coordination.k8s.io/v1"), &doc); err != nil {
		t.Fatal(err)
	}
	gvks := doc.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"].GVKs
	want := map[string]bool{"/v1": true, "coordination.k8s.io/v1": true}
	for _, gvk := range gvks {
		if !want[gvk["group"]+"/"+gvk["version"]] {
			t.Errorf("DeleteOptions lists %v", gvk)
		}
		delete(want, gvk["group"]+"/"+gvk["version"])
	}
	if len(want) > 0 {
		t.Errorf("DeleteOptions lists %v, missing %v", gvks, want)
	}
}

// TestBuildsLeaveTheConfigurationsDefinitionsAlone: the documents are built while the server runs, so
// building them must not write into the definitions of the configuration the server was built with, which
// anything may read meanwhile (go test -race reports a write; without -race, a map read beside a write
// may end the process).
func TestBuildsLeaveTheConfigurationsDefinitionsAlone(t *testing.T) {
	s, config := newServerAndConfig(t, true)
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, d := range config.Definitions {
				for range d.Schema.Extensions {
				}
			}
		}
	})
	var clients sync.WaitGroup
	for _, p := range []string{"/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/coordination.k8s.io/v1"} {
		clients.Go(func() {
			if _, err := fetch(s, p); err != nil {
				t.Error(err)
			}
		})
	}
	clients.Wait()
	close(stop)
	reader.Wait()
}

// newServer builds a server of the two groups, its OpenAPI documents built in PrepareRun (lazy false)
// or installed by Install.
func newServer(t *testing.T, lazy bool) *genericapiserver.GenericAPIServer {
	t.Helper()
	s, _ := newServerAndConfig(t, lazy)
	return s
}

// newServerAndConfig is newServer, and the OpenAPI v3 configuration it was given.
func newServerAndConfig(t *testing.T, lazy bool) (*genericapiserver.GenericAPIServer, *common.OpenAPIV3Config) {
	t.Helper()
	scheme := runtime.NewScheme()
	// batch/v1 is in the scheme, not served: the kinds every group shares list it too.
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme)

	config := genericapiserver.NewConfig(codecs)
	config.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString("1.37", "", "")
	config.ExternalAddress = "127.0.0.1:6443"
	config.LoopbackClientConfig = &restclient.Config{Host: "https://127.0.0.1:6443"}
	namer := openapinamer.NewDefinitionNamer(scheme)
	config.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(rayopenapi.GetOpenAPIDefinitions, namer)
	config.OpenAPIConfig.Info.Title = "Kubernetes"
	config.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(rayopenapi.GetOpenAPIDefinitions, namer)
	config.OpenAPIV3Config.Info.Title = "Kubernetes"
	config.SkipOpenAPIInstallation = lazy
	server, err := config.Complete(nil).New("test", genericapiserver.NewEmptyDelegate())
	if err != nil {
		t.Fatal(err)
	}

	core := genericapiserver.NewDefaultAPIGroupInfo("", scheme, metav1.ParameterCodec, codecs)
	core.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{"configmaps": &storage{newObj: func() runtime.Object { return &corev1.ConfigMap{} },
		newList: func() runtime.Object { return &corev1.ConfigMapList{} }, singular: "configmap"}}
	if err := server.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &core); err != nil {
		t.Fatal(err)
	}
	coordination := genericapiserver.NewDefaultAPIGroupInfo(coordinationv1.GroupName, scheme, metav1.ParameterCodec, codecs)
	coordination.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{"leases": &storage{newObj: func() runtime.Object { return &coordinationv1.Lease{} },
		newList: func() runtime.Object { return &coordinationv1.LeaseList{} }, singular: "lease"}}
	if err := server.InstallAPIGroup(&coordination); err != nil {
		t.Fatal(err)
	}
	server.PrepareRun()
	if lazy {
		Install(server, config.OpenAPIConfig, config.OpenAPIV3Config)
	}
	return server, config.OpenAPIV3Config
}

// get is the body of a GET of path from s's handlers (past authentication, which the documents do not
// depend on).
func get(t *testing.T, s *genericapiserver.GenericAPIServer, path string) []byte {
	t.Helper()
	body, err := fetch(s, path)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// fetch is get for any goroutine: it returns what went wrong.
func fetch(s *genericapiserver.GenericAPIServer, path string) ([]byte, error) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Accept", "application/json")
	s.Handler.NonGoRestfulMux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes(), nil
}

// sameJSON fails unless got and want are the same JSON value (from any goroutine).
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := errors.Join(json.Unmarshal(got, &g), json.Unmarshal(want, &w)); err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s differs from the document built in PrepareRun:\n got %.600s\nwant %.600s", what, got, want)
	}
}

// storage is a namespaced resource that holds nothing: enough to be served and described, with the
// verbs whose documents use the kinds every group shares (watch: WatchEvent, delete: DeleteOptions).
type storage struct {
	newObj, newList func() runtime.Object
	singular        string
}

func (s *storage) New() runtime.Object     { return s.newObj() }
func (s *storage) Destroy()                {}
func (s *storage) NamespaceScoped() bool   { return true }
func (s *storage) GetSingularName() string { return s.singular }
func (s *storage) NewList() runtime.Object { return s.newList() }
func (s *storage) ConvertToTable(ctx context.Context, obj, _ runtime.Object) (*metav1.Table, error) {
	return rest.NewDefaultTableConvertor(schema.GroupResource{}).ConvertToTable(ctx, obj, nil)
}
func (s *storage) Get(context.Context, string, *metav1.GetOptions) (runtime.Object, error) {
	return s.newObj(), nil
}
func (s *storage) List(context.Context, *metainternalversion.ListOptions) (runtime.Object, error) {
	return s.newList(), nil
}
func (s *storage) Watch(context.Context, *metainternalversion.ListOptions) (watch.Interface, error) {
	return watch.NewEmptyWatch(), nil
}
func (s *storage) Delete(context.Context, string, rest.ValidateObjectFunc, *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return s.newObj(), true, nil
}

// TestFirstRequestsAtOnce: clients asking for every document at the same moment, on a server that has
// built none, all get the documents a server built in PrepareRun serves.
func TestFirstRequestsAtOnce(t *testing.T) {
	eager, lazy := newServer(t, false), newServer(t, true)
	paths := []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/coordination.k8s.io/v1"}
	want := map[string][]byte{}
	for _, p := range paths {
		want[p] = get(t, eager, p)
	}
	var wg sync.WaitGroup
	for range 4 {
		for _, p := range paths {
			wg.Go(func() {
				got, err := fetch(lazy, p)
				if err != nil {
					t.Error(err)
					return
				}
				sameJSON(t, p, got, want[p])
			})
		}
	}
	wg.Wait()
}
