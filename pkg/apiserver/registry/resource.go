// Package registry holds what every built-in resource's store shares: a Resource describes the kind's own
// rules (validation, preparation, selectable fields, printing), and Build turns it into a generic
// registry store with its status and scale subresources. The create, update and status rules common to
// every kind are one strategy, here (strategy.go), which calls the Resource's hooks.
//
// Each resource lives in its own folder below this one, its store.go declaring its Resource; most need
// nothing more, their validation coming from pkg/apiserver/validation through Validator and
// UpdateValidator. A resource whose hooks need code of their own keeps it beside in strategy.go
// (namespaces, pods, secrets, services), and its other subresources in files of their own (pods' binding,
// log, exec, port-forward and proxy; services' proxy; service accounts' token, with proxyrest holding what
// the two proxies share). RBAC's four kinds share one folder, rbac, with the guard against escalation on
// their writes. The review resources (authentication and authorization) store nothing: their folders
// hold a rest.go.
package registry

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Resource describes one built-in resource to the shared store machinery. Only New, NewList, Resource and
// Kind are required; every hook left nil does nothing.
type Resource struct {
	// Resource is the group and plural resource name, e.g. {"", "pods"}.
	Resource schema.GroupResource
	// Singular is the singular resource name, e.g. "pod".
	Singular string
	// Version is the served (and stored) version, e.g. "v1".
	Version string
	// Kind is the kind's name, e.g. "Pod".
	Kind string
	// New returns an empty object of the kind.
	New func() runtime.Object
	// NewList returns an empty list of the kind.
	NewList func() runtime.Object
	// Namespaced says whether objects live in a namespace.
	Namespaced bool
	// HasStatus says the kind has a status subresource: the main endpoint ignores status changes and
	// the status endpoint ignores everything else.
	HasStatus bool
	// HasScale says the kind has a scale subresource (autoscaling/v1 Scale); the kind's Go type must have
	// Spec.Replicas (*int32), Spec.Selector (*metav1.LabelSelector) and Status.Replicas (int32).
	HasScale bool
	// AllowCreateOnUpdate lets a PUT create a missing object (as for endpoints and leases).
	AllowCreateOnUpdate bool

	// PrepareForCreate normalizes a new object after the shared preparation (status cleared, generation 1).
	PrepareForCreate func(ctx context.Context, obj runtime.Object)
	// PrepareForUpdate normalizes an update after the shared preparation (status kept, generation bumped).
	PrepareForUpdate func(ctx context.Context, obj, old runtime.Object)
	// PrepareForStatusUpdate normalizes a status update after the shared one (spec kept).
	PrepareForStatusUpdate func(ctx context.Context, obj, old runtime.Object)
	// Validate checks a new object.
	Validate func(obj runtime.Object) field.ErrorList
	// ValidateUpdate checks an update of the main resource.
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
	// ValidateStatusUpdate checks an update through the status subresource.
	ValidateStatusUpdate func(obj, old runtime.Object) field.ErrorList
	// GracefulDelete decides the grace period of a delete (see rest.RESTGracefulDeleteStrategy); nil
	// means objects are deleted at once.
	GracefulDelete func(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool

	// SelectableFields lists the field selector keys the kind supports beyond metadata.name and
	// metadata.namespace, each with the function that reads it from an object.
	SelectableFields map[string]func(obj runtime.Object) string
	// Table prints the kind for `kubectl get`; nil uses the printers package's table for the kind, else
	// the default NAME/CREATED AT table.
	Table rest.TableConvertor
	// ShortNames are the kind's short names for kubectl, e.g. "po".
	ShortNames []string
	// Categories are the kind's categories, e.g. "all".
	Categories []string
	// ShouldDeleteDuringUpdate, when set, decides whether an update of an object marked for deletion
	// removes it (the generic rule: no finalizers left and a zero grace period).
	ShouldDeleteDuringUpdate func(ctx context.Context, key string, obj, existing runtime.Object) bool
	// TTL, when set, gives objects a time to live in seconds (events expire this way).
	TTL uint64
}

// GroupVersion returns the served group version.
func (r *Resource) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Resource.Group, Version: r.Version}
}

// fieldSet returns the selectable fields of obj.
func (r *Resource) fieldSet(obj runtime.Object, meta metav1.Object) fields.Set {
	set := fields.Set{"metadata.name": meta.GetName()}
	if r.Namespaced {
		set["metadata.namespace"] = meta.GetNamespace()
	}
	for key, get := range r.SelectableFields {
		set[key] = get(obj)
	}
	return set
}

// Storage maps resource paths ("pods", "pods/status") to their REST storage, as an API group info wants them.
type Storage map[string]rest.Storage

// Build makes the main, status and scale endpoints of r and returns them keyed by path, with the main store.
func Build(scheme *runtime.Scheme, r *Resource, optsGetter generic.RESTOptionsGetter) (Storage, *REST, error) {
	main, status, err := NewStore(scheme, r, optsGetter)
	if err != nil {
		return nil, nil, err
	}
	s := Storage{r.Resource.Resource: main}
	if status != nil {
		s[r.Resource.Resource+"/status"] = status
	}
	if r.HasScale {
		s[r.Resource.Resource+"/scale"] = &ScaleREST{store: main.Store, r: r}
	}
	return s, main, nil
}

// Validator adapts a typed validation function to a Resource hook.
func Validator[T runtime.Object](f func(T) field.ErrorList) func(runtime.Object) field.ErrorList {
	return func(obj runtime.Object) field.ErrorList { return f(obj.(T)) }
}

// UpdateValidator adapts a typed update validation function to a Resource hook.
func UpdateValidator[T runtime.Object](f func(T, T) field.ErrorList) func(runtime.Object, runtime.Object) field.ErrorList {
	return func(obj, old runtime.Object) field.ErrorList { return f(obj.(T), old.(T)) }
}
