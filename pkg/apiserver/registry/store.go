package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/rayctl/rayctl/pkg/apiserver/printers"
)

// REST is a Resource's main endpoint: the generic store plus the kind's short names and categories.
type REST struct {
	*genericregistry.Store
	resource *Resource
}

// ShortNames returns the kind's short names for kubectl.
func (r *REST) ShortNames() []string { return r.resource.ShortNames }

// Categories returns the categories the kind belongs to (e.g. "all").
func (r *REST) Categories() []string { return r.resource.Categories }

// SingularName returns the singular resource name.
func (r *REST) SingularName() string { return r.resource.Singular }

// StatusREST is a Resource's status subresource: get and update of status only.
type StatusREST struct {
	store *genericregistry.Store
}

// New returns an empty object of the kind.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

// Destroy does nothing: the main store owns the storage.
func (r *StatusREST) Destroy() {}

// Get reads the whole object.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update writes the object's status, keeping everything else as stored.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Status updates never create, whatever the main endpoint allows.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields returns the fields the status endpoint leaves alone.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable prints the object as the main endpoint does.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// NewStore builds the main endpoint of r, and its status endpoint when r.HasStatus (else nil).
func NewStore(scheme *runtime.Scheme, r *Resource, optsGetter generic.RESTOptionsGetter) (*REST, *StatusREST, error) {
	if err := registerFieldLabels(scheme, r); err != nil {
		return nil, nil, err
	}
	s := newStrategy(scheme, r)
	store := &genericregistry.Store{
		NewFunc:                   r.New,
		NewListFunc:               r.NewList,
		DefaultQualifiedResource:  r.Resource,
		SingularQualifiedResource: r.singular(),
		PredicateFunc:             r.predicate,
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		ResetFieldsStrategy:       s,
		TableConvertor:            r.Table,
	}
	if r.ShouldDeleteDuringUpdate != nil {
		store.ShouldDeleteDuringUpdate = r.ShouldDeleteDuringUpdate
	}
	if r.GracefulDelete != nil {
		store.DeleteStrategy = gracefulStrategy{s}
	}
	if store.TableConvertor == nil {
		store.TableConvertor = printers.ForKind(schema.GroupKind{Group: r.Resource.Group, Kind: r.Kind})
	}
	if store.TableConvertor == nil {
		store.TableConvertor = rest.NewDefaultTableConvertor(r.Resource)
	}
	if r.TTL > 0 {
		ttl := r.TTL
		store.TTLFunc = func(obj runtime.Object, existing uint64, update bool) (uint64, error) { return ttl, nil }
	}
	options := &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: r.attrs}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.Resource, err)
	}
	main := &REST{Store: store, resource: r}
	if !r.HasStatus {
		return main, nil, nil
	}
	statusStore := *store
	ss := statusStrategy{s}
	statusStore.UpdateStrategy = ss
	statusStore.ResetFieldsStrategy = ss
	return main, &StatusREST{store: &statusStore}, nil
}

func (r *Resource) singular() schema.GroupResource {
	return schema.GroupResource{Group: r.Resource.Group, Resource: r.Singular}
}

// attrs returns the labels and selectable fields of obj.
func (r *Resource) attrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	return labels.Set(m.GetLabels()), r.fieldSet(obj, m), nil
}

// predicate matches objects against label and field selectors.
func (r *Resource) predicate(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: r.attrs}
}

// registerFieldLabels tells the scheme which field selector keys the kind accepts, so a request with an
// unknown key gets a clear 400 rather than an empty list.
func registerFieldLabels(scheme *runtime.Scheme, r *Resource) error {
	gvk := r.GroupVersion().WithKind(r.Kind)
	return scheme.AddFieldLabelConversionFunc(gvk, func(label, value string) (string, string, error) {
		switch label {
		case "metadata.name":
			return label, value, nil
		case "metadata.namespace":
			if r.Namespaced {
				return label, value, nil
			}
		default:
			if _, ok := r.SelectableFields[label]; ok {
				return label, value, nil
			}
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	})
}
