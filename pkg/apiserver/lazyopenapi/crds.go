package lazyopenapi

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apiextensionsfeatures "k8s.io/apiextensions-apiserver/pkg/features"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
)

// ServeCustomResources keeps service's /openapi/v3 documents of the custom resources' group versions in
// step with the CRDs crds holds: a group version is listed while an Established CRD serves it, and its
// document (every such CRD's paths and schemas, merged) is built when first asked for, then kept until
// one of its CRDs changes. It takes the place of apiextensions' OpenAPI v3 controller, which builds every
// CRD's document as soon as the CRD is Established and keeps them all (megabytes for the Ray CRDs'
// schemas), and serves the same bytes: the same builder and merge, from the same CRD objects.
//
// Where they differ, this one serves what a fresh start of either would: a version a CRD stops serving
// loses its document at once (apiextensions keeps the last one until a restart or the CRD's deletion),
// and a CRD whose document fails to build or conflicts with another's is left out of its group version
// (apiextensions keeps its last good document). Any change to a CRD, its status included, builds its
// group version's document anew on the next request (the same bytes when only the status changed).
//
// Install leaves GenericAPIServer.OpenAPIV3VersionedService unset so that apiextensions does not start
// its own controller beside this one. Call ServeCustomResources before crds starts.
func ServeCustomResources(service *handler3.OpenAPIService, crds cache.SharedIndexInformer) error {
	s := &customResources{service: service, byGroupVersion: map[schema.GroupVersion]map[string]*apiextensionsv1.CustomResourceDefinition{}}
	_, err := crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.put(obj) },
		UpdateFunc: func(_, obj any) { s.put(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				s.set(crd.Name, nil)
			}
		},
	})
	return err
}

// customResources is the CRDs behind each custom resource group version's document.
type customResources struct {
	service *handler3.OpenAPIService

	mu             sync.Mutex
	byGroupVersion map[schema.GroupVersion]map[string]*apiextensionsv1.CustomResourceDefinition
}

// put records a CRD that was added or changed.
func (s *customResources) put(obj any) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return
	}
	var served []string
	// As apiextensions: a CRD is documented once Established, in each version it serves.
	if apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served = append(served, v.Name)
			}
		}
	}
	s.set(crd.Name, crd, served...)
}

// set makes crd (nil: none) the CRD called name in each of versions of its group and takes it out of the
// group versions it no longer serves; every group version that changed gets a new document to build.
func (s *customResources) set(name string, crd *apiextensionsv1.CustomResourceDefinition, versions ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := map[schema.GroupVersion]bool{}
	for gv, named := range s.byGroupVersion {
		if _, ok := named[name]; ok && (crd == nil || gv.Group != crd.Spec.Group || !slices.Contains(versions, gv.Version)) {
			delete(named, name)
			changed[gv] = true
		}
	}
	if crd != nil {
		for _, v := range versions {
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v}
			if s.byGroupVersion[gv] == nil {
				s.byGroupVersion[gv] = map[string]*apiextensionsv1.CustomResourceDefinition{}
			}
			if old := s.byGroupVersion[gv][name]; old == nil || old.ResourceVersion != crd.ResourceVersion || old.UID != crd.UID {
				s.byGroupVersion[gv][name] = crd
				changed[gv] = true
			}
		}
	}
	for gv := range changed {
		path := "apis/" + gv.Group + "/" + gv.Version
		named := s.byGroupVersion[gv]
		if len(named) == 0 {
			delete(s.byGroupVersion, gv)
			s.service.DeleteGroupVersion(path)
			continue
		}
		s.service.UpdateGroupVersionLazy(path, groupVersionDocument(gv.Version, named))
	}
}

// crdBuilds serializes the documents' builds, as apiextensions' controller builds them in one worker:
// handler3 may ask for several group versions at once.
var crdBuilds sync.Mutex

// crdDocumentsBuilt counts the CRD documents built (tests read it).
var crdDocumentsBuilt atomic.Int64

// groupVersionDocument is version's document of the CRDs of named (a snapshot), built once, when first
// asked for. Its etag names the CRDs and their resourceVersions, so that handler3 encodes it anew only
// when they change.
func groupVersionDocument(version string, named map[string]*apiextensionsv1.CustomResourceDefinition) cached.Value[*spec3.OpenAPI] {
	names := make([]string, 0, len(named))
	for n := range named {
		names = append(names, n)
	}
	slices.Sort(names)
	crds := make([]*apiextensionsv1.CustomResourceDefinition, len(names))
	tags := make([]string, len(names))
	for i, n := range names {
		crds[i] = named[n]
		tags[i] = fmt.Sprintf("%s/%s/%s", n, crds[i].UID, crds[i].ResourceVersion)
	}
	etag := strings.Join(tags, ",")
	return cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
		crdBuilds.Lock()
		defer crdBuilds.Unlock()
		specs := make([]*spec3.OpenAPI, 0, len(crds))
		for _, crd := range crds {
			spec, err := builder.BuildOpenAPIV3(crd, version, builder.Options{
				V2:                      false,
				IncludeSelectableFields: utilfeature.DefaultFeatureGate.Enabled(apiextensionsfeatures.CustomResourceFieldSelectors),
			})
			crdDocumentsBuilt.Add(1)
			if err != nil {
				// Left out, as apiextensions leaves out a CRD whose document does not build.
				klog.ErrorS(err, "Building a custom resource's OpenAPI v3 document", "crd", crd.Name, "version", version)
				continue
			}
			specs = append(specs, spec)
		}
		return mergeDocuments(specs, version), etag, nil
	}))
}

// mergeDocuments merges the CRDs' documents of a group version as apiextensions does. Two of them may
// conflict (two Established CRDs of one group whose kinds were edited to the same name): then those
// that merge are kept and the others left out, each logged. An error here would fail the discovery
// document of every group version, where apiextensions fails only that group version's update.
func mergeDocuments(specs []*spec3.OpenAPI, version string) *spec3.OpenAPI {
	merged, err := builder.MergeSpecsV3(specs...)
	if err == nil {
		return merged
	}
	var kept []*spec3.OpenAPI
	merged = &spec3.OpenAPI{}
	for _, spec := range specs {
		tried, err := builder.MergeSpecsV3(append(kept, spec)...)
		if err != nil {
			klog.ErrorS(err, "A custom resource's OpenAPI v3 document conflicts with another of its group version, left out", "version", version)
			continue
		}
		kept, merged = append(kept, spec), tried
	}
	return merged
}
