package registry

import (
	"context"
	"fmt"
	"reflect"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// ScaleREST is a Resource's scale subresource: an autoscaling/v1 Scale read from and written to the
// object's spec.replicas, status.replicas and spec.selector, as `kubectl scale` and autoscalers use it.
type ScaleREST struct {
	store *genericregistry.Store
	r     *Resource
}

var _ rest.GroupVersionKindProvider = &ScaleREST{}

// GroupVersionKind says the subresource speaks autoscaling/v1 Scale, whatever the parent's group.
func (s *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// New returns an empty Scale.
func (s *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy does nothing: the main store owns the storage.
func (s *ScaleREST) Destroy() {}

// Get reads the object's Scale.
func (s *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := s.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return toScale(obj)
}

// Update writes spec.replicas from the Scale given; the object goes through the main endpoint's rules
// (its generation grows when the count changes).
func (s *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := s.store.Update(ctx, name, &scaleUpdate{info: objInfo, validate: updateValidation, resource: s.r.Resource},
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, options)
	if err != nil {
		return nil, false, err
	}
	scale, err := toScale(obj)
	return scale, false, err
}

// scaleUpdate turns an update of a Scale into an update of its object.
type scaleUpdate struct {
	info     rest.UpdatedObjectInfo
	validate rest.ValidateObjectUpdateFunc
	resource schema.GroupResource
}

func (u *scaleUpdate) Preconditions() *metav1.Preconditions { return u.info.Preconditions() }

func (u *scaleUpdate) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	oldScale, err := toScale(oldObj)
	if err != nil {
		return nil, err
	}
	obj, err := u.info.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	scale, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected an autoscaling/v1 Scale, got %T", obj))
	}
	var errs field.ErrorList
	if scale.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0"))
	}
	if scale.Name != oldScale.Name {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), scale.Name, "must match the name of the scaled object"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), scale.Name, errs)
	}
	if u.validate != nil {
		if err := u.validate(ctx, scale, oldScale); err != nil {
			return nil, err
		}
	}
	newObj := oldObj.DeepCopyObject()
	replicas := scale.Spec.Replicas
	reflect.ValueOf(newObj).Elem().FieldByName("Spec").FieldByName("Replicas").Set(reflect.ValueOf(&replicas))
	if scale.ResourceVersion != "" {
		m, err := meta.Accessor(newObj)
		if err != nil {
			return nil, err
		}
		// The Scale's resourceVersion guards the write, as the object's own would.
		m.SetResourceVersion(scale.ResourceVersion)
	}
	return newObj, nil
}

// toScale reads the Scale of an object with spec.replicas, spec.selector and status.replicas.
func toScale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	v := reflect.ValueOf(obj).Elem()
	spec, status := v.FieldByName("Spec"), v.FieldByName("Status")
	scale := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp(),
		},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status.FieldByName("Replicas").Int())},
	}
	if p := spec.FieldByName("Replicas"); !p.IsNil() {
		scale.Spec.Replicas = int32(p.Elem().Int())
	}
	if sel, ok := spec.FieldByName("Selector").Interface().(*metav1.LabelSelector); ok && sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		scale.Status.Selector = s.String()
	}
	return scale, nil
}
