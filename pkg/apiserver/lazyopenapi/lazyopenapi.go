// Package lazyopenapi serves a GenericAPIServer's OpenAPI documents (/openapi/v2 and /openapi/v3)
// built on the first request for them, not at start.
//
// k8s.io/apiserver builds both documents of the built-in groups in PrepareRun: every path, operation
// and definition, tens of milliseconds of CPU on each start and ~15 MB of heap kept for as long as
// the server runs, although a control plane on a laptop may never be asked for them (its own
// components do not read them; kubectl does for `apply` and `explain`). Here the same documents are
// built from the same routes and configuration when first asked for, and kept from then on, as
// upstream keeps them. The custom resources' parts are added by apiextensions' OpenAPI v2 controller,
// which finds the v2 service where PrepareRun would have left it, and for v3 by ServeCustomResources,
// which builds each custom resource group version's document when first asked for too.
package lazyopenapi

import (
	"maps"
	"net/http"
	"strings"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Install serves /openapi/v2 (from v2) and /openapi/v3 (from v3) for s's go-restful web services,
// each document built on its first request, and sets s.OpenAPIVersionedService and s.StaticOpenAPISpec
// as PrepareRun would have, for apiextensions' OpenAPI v2 controller (which builds the custom resources'
// parts when the document is served). It returns the /openapi/v3 service (nil without v3), leaving
// s.OpenAPIV3VersionedService unset: apiextensions' OpenAPI v3 controller, which would build every CRD's
// document at once, does not start; ServeCustomResources adds the CRDs' documents to the service
// instead. Call it after PrepareRun, on a server whose configuration had SkipOpenAPIInstallation set and
// v2 and v3 as its OpenAPI configurations; a nil configuration serves no document of that version.
func Install(s *genericapiserver.GenericAPIServer, v2 *common.Config, v3 *common.OpenAPIV3Config) *handler3.OpenAPIService {
	// The web services as PrepareRun would have seen them.
	services, mux := s.Handler.GoRestfulContainer.RegisteredWebServices(), s.Handler.NonGoRestfulMux
	if v2 != nil {
		s.OpenAPIVersionedService, s.StaticOpenAPISpec = installV2(services, mux, v2)
	}
	if v3 == nil {
		return nil
	}
	return installV3(services, mux, v3)
}

// installV2 serves /openapi/v2 on mux. The static spec it returns is empty until the document is
// first asked for: apiextensions' OpenAPI controller merges the custom resources into it only when
// the document is served, and every request fills it first.
func installV2(services []*restful.WebService, mux common.PathHandler, config *common.Config) (*handler.OpenAPIService, *spec.Swagger) {
	static := &spec.Swagger{}
	var once sync.Once
	var buildErr error
	fill := func() error {
		once.Do(func() {
			built, err := builder.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(services), config)
			if err != nil {
				buildErr = err
				klog.ErrorS(err, "Building the OpenAPI v2 document")
				return
			}
			// As k8s.io/apiserver serves it: without the definitions' defaults.
			built.Definitions = handler.PruneDefaults(built.Definitions)
			*static = *built
		})
		return buildErr
	}
	service := handler.NewOpenAPIServiceLazy(cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		if err := fill(); err != nil {
			return nil, "", err
		}
		return static, "built-in", nil
	})))
	service.RegisterOpenAPIVersionedService("/openapi/v2", filledFirst{mux: mux, fill: fill})
	return service, static
}

// filledFirst registers handlers that fill the static v2 spec before they serve.
type filledFirst struct {
	mux  common.PathHandler
	fill func() error
}

// Handle registers h at path, behind the fill.
func (f filledFirst) Handle(path string, h http.Handler) {
	f.mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f.fill(); err != nil {
			http.Error(w, "building the OpenAPI document: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

// installV3 serves /openapi/v3 on mux. The documents of all group versions are built together, one
// after another as PrepareRun builds them, on the first request that needs one (the discovery document
// at /openapi/v3 needs them all: it names each by its hash), not side by side as handler3 would ask for
// them. They are built from config's definitions with extensions of their own (see ownExtensions).
func installV3(services []*restful.WebService, mux common.PathHandlerByGroupVersion, config *common.OpenAPIV3Config) *handler3.OpenAPIService {
	service := handler3.NewOpenAPIService()
	// The error is always nil: registering only adds handlers to mux.
	_ = service.RegisterOpenAPIV3VersionedService("/openapi/v3", mux)
	byPath := map[string]*restful.WebService{}
	for _, ws := range services {
		byPath[strings.TrimPrefix(ws.RootPath(), "/")] = ws
	}
	build := sync.OnceValue(func() map[string]builtDocument {
		// Without definitions computed in the configuration, the builder asks GetDefinitions for new ones.
		own := *config
		own.Definitions = ownExtensions(config.Definitions)
		docs := make(map[string]builtDocument, len(byPath))
		for path, ws := range byPath {
			doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), &own)
			if err != nil {
				// Left out, as PrepareRun leaves it out: the requests that asked fail, later ones do not
				// see it (not removed here: the service's lock may be held by the request building it).
				klog.ErrorS(err, "Building an OpenAPI v3 document", "groupVersion", path)
				go service.DeleteGroupVersion(path)
			} else if group, version, ok := groupVersion(path); ok {
				narrowSharedKinds(doc, group, version)
			}
			docs[path] = builtDocument{doc, err}
		}
		return docs
	})
	for path := range byPath {
		service.UpdateGroupVersionLazy(path, cached.Func(func() (*spec3.OpenAPI, string, error) {
			built := build()[path]
			return built.doc, "built-in", built.err
		}))
	}
	return service
}

// ownExtensions is defs with each definition's top-level extensions copied: kube-openapi's builder
// writes into those of the definitions it builds from, and the builds now happen while the server runs;
// the copy leaves the configuration the server was built with as it was, for whatever reads it. The rest
// of each definition is shared (the builder only reads it), as when PrepareRun builds.
func ownExtensions(defs map[string]common.OpenAPIDefinition) map[string]common.OpenAPIDefinition {
	if defs == nil {
		return nil
	}
	own := make(map[string]common.OpenAPIDefinition, len(defs))
	for name, d := range defs {
		d.Schema.Extensions = maps.Clone(d.Schema.Extensions)
		own[name] = d
	}
	return own
}

// builtDocument is a group version's OpenAPI v3 document, or why it could not be built.
type builtDocument struct {
	doc *spec3.OpenAPI
	err error
}

// groupVersion reads the group and version from a web service's path: api/v1 is the core group's
// v1, apis/GROUP/VERSION a named group's.
func groupVersion(path string) (group, version string, ok bool) {
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 2 && parts[0] == "api":
		return "", parts[1], true
	case len(parts) == 3 && parts[0] == "apis":
		return parts[1], parts[2], true
	}
	return "", "", false
}

// sharedKinds are the kinds registered into every group version (metav1.AddToGroupVersion), whose
// definitions would otherwise list every group version the server serves.
var sharedKinds = map[string]bool{"WatchEvent": true, "DeleteOptions": true}

// gvkExtension is the extension that lists the group-version-kinds a definition describes.
const gvkExtension = "x-kubernetes-group-version-kind"

// narrowSharedKinds keeps, in doc's definitions of sharedKinds, only the group-version-kinds of
// group/version and of the core group's v1, as kube-apiserver serves a group version's document.
func narrowSharedKinds(doc *spec3.OpenAPI, group, version string) {
	if doc == nil || doc.Components == nil {
		return
	}
	for _, schema := range doc.Components.Schemas {
		if schema == nil {
			continue
		}
		gvks, _ := schema.Extensions[gvkExtension].([]interface{})
		if len(gvks) < 2 {
			continue
		}
		first, _ := gvks[0].(map[string]interface{})
		if kind, _ := first["kind"].(string); !sharedKinds[kind] {
			continue
		}
		var kept []interface{}
		for _, item := range gvks {
			gvk, _ := item.(map[string]interface{})
			if gvk == nil {
				continue
			}
			g, gok := gvk["group"].(string)
			v, vok := gvk["version"].(string)
			if gok && vok && ((g == group && v == version) || (g == "" && v == "v1")) {
				kept = append(kept, item)
			}
		}
		if len(kept) == 0 {
			delete(schema.Extensions, gvkExtension)
			continue
		}
		schema.Extensions[gvkExtension] = kept
	}
}
