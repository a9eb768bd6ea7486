// Package namespace is the registry of core/v1 namespaces. Deleting a namespace first marks it
// Terminating; the namespace controller empties it and removes the "kubernetes" finalizer through
// namespaces/finalize, and the next delete removes it.
package namespace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes namespaces to the shared store.
var Resource = &registry.Resource{
	Resource:             corev1.Resource("namespaces"),
	Singular:             "namespace",
	Version:              "v1",
	Kind:                 "Namespace",
	New:                  func() runtime.Object { return &corev1.Namespace{} },
	NewList:              func() runtime.Object { return &corev1.NamespaceList{} },
	HasStatus:            true,
	PrepareForCreate:     prepareForCreate,
	PrepareForUpdate:     prepareForUpdate,
	Validate:             registry.Validator(validation.ValidateNamespace),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidateNamespaceUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidateNamespaceStatusUpdate),
	SelectableFields: map[string]func(runtime.Object) string{
		"status.phase": func(o runtime.Object) string { return string(o.(*corev1.Namespace).Status.Phase) },
	},
	ShortNames:               []string{"ns"},
	ShouldDeleteDuringUpdate: shouldDeleteDuringUpdate,
}

// Immortal namespaces cannot be deleted, as on a real cluster.
var Immortal = map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true}

// NewStorage returns the namespaces endpoints: namespaces, namespaces/status and namespaces/finalize.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (registry.Storage, error) {
	storage, main, err := registry.Build(scheme, Resource, optsGetter)
	if err != nil {
		return nil, err
	}
	finalize := *main.Store
	finalize.UpdateStrategy = finalizeStrategy{main.Store.UpdateStrategy}
	finalize.ResetFieldsStrategy = nil
	storage["namespaces"] = &REST{REST: main}
	storage["namespaces/finalize"] = &FinalizeREST{store: &finalize}
	return storage, nil
}

// REST is the namespaces endpoint, with the two-step delete.
type REST struct {
	*registry.REST
}

// Delete marks a namespace Terminating, or removes it once nothing holds it any more.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	if Immortal[name] {
		return nil, false, apierrors.NewForbidden(corev1.Resource("namespaces"), name, fmt.Errorf("this namespace may not be deleted"))
	}
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if options == nil {
		options = metav1.NewDeleteOptions(0)
	}
	if options.Preconditions != nil && options.Preconditions.UID != nil && *options.Preconditions.UID != ns.UID {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name, fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *options.Preconditions.UID, ns.UID))
	}
	if ns.DeletionTimestamp == nil && len(ns.Spec.Finalizers) > 0 {
		return r.markTerminating(ctx, name, ns, deleteValidation, options)
	}
	if len(ns.Spec.Finalizers) > 0 {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
			fmt.Errorf("the system is ensuring all content is removed from this namespace; upon completion, this namespace will automatically be purged by the system"))
	}
	return r.REST.Delete(ctx, name, deleteValidation, options)
}

func (r *REST) markTerminating(ctx context.Context, name string, ns *corev1.Namespace, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	if deleteValidation != nil {
		if err := deleteValidation(ctx, ns); err != nil {
			return nil, false, err
		}
	}
	key, err := r.KeyFunc(ctx, name)
	if err != nil {
		return nil, false, err
	}
	out := &corev1.Namespace{}
	dryRun := len(options.DryRun) > 0
	err = r.Store.Storage.GuaranteedUpdate(ctx, key, out, false, &storage.Preconditions{UID: &ns.UID}, storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
		cur := obj.(*corev1.Namespace)
		if cur.DeletionTimestamp == nil {
			now := metav1.Now()
			cur.DeletionTimestamp = &now
			zero := int64(0)
			cur.DeletionGracePeriodSeconds = &zero
		}
		if options.PropagationPolicy != nil && *options.PropagationPolicy == metav1.DeletePropagationOrphan {
			cur.Finalizers = appendOnce(cur.Finalizers, metav1.FinalizerOrphanDependents)
		}
		cur.Status.Phase = corev1.NamespaceTerminating
		return cur, nil
	}), dryRun, nil)
	if err != nil {
		return nil, false, err
	}
	return out, false, nil
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// FinalizeREST is namespaces/finalize: an update that changes only spec.finalizers.
type FinalizeREST struct {
	store *genericregistry.Store
}

// New returns an empty Namespace.
func (r *FinalizeREST) New() runtime.Object { return &corev1.Namespace{} }

// Destroy does nothing: the main store owns the storage.
func (r *FinalizeREST) Destroy() {}

// Update writes the namespace's spec.finalizers.
func (r *FinalizeREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// finalizeStrategy keeps everything of the stored namespace but the new spec.finalizers.
type finalizeStrategy struct {
	rest.RESTUpdateStrategy
}

func (s finalizeStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ns, oldNs := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	finalizers := ns.Spec.Finalizers
	*ns = *oldNs.DeepCopy()
	ns.Spec.Finalizers = finalizers
}
