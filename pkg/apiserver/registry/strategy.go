package registry

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// strategy is the create, update and delete behaviour of a Resource's main endpoint.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	r *Resource
}

func newStrategy(typer runtime.ObjectTyper, r *Resource) *strategy {
	return &strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, r: r}
}

func (s *strategy) NamespaceScoped() bool { return s.r.Namespaced }

func (s *strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.r.HasStatus {
		setField(obj, "Status", reflect.Zero(fieldType(obj, "Status")))
	}
	if hasField(obj, "Spec") {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetGeneration(1)
		}
	}
	if s.r.PrepareForCreate != nil {
		s.r.PrepareForCreate(ctx, obj)
	}
}

func (s *strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.r.HasStatus {
		setField(obj, "Status", getField(old, "Status"))
	}
	if hasField(obj, "Spec") && !equality.Semantic.DeepEqual(getField(obj, "Spec").Interface(), getField(old, "Spec").Interface()) {
		newMeta, err1 := meta.Accessor(obj)
		oldMeta, err2 := meta.Accessor(old)
		if err1 == nil && err2 == nil {
			newMeta.SetGeneration(oldMeta.GetGeneration() + 1)
		}
	}
	if s.r.PrepareForUpdate != nil {
		s.r.PrepareForUpdate(ctx, obj, old)
	}
}

func (s *strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	if s.r.Validate == nil {
		return nil
	}
	return s.r.Validate(obj)
}

func (s *strategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (s *strategy) AllowCreateOnUpdate(ctx context.Context) bool { return s.r.AllowCreateOnUpdate }

func (s *strategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

func (s *strategy) Canonicalize(obj runtime.Object) {}

func (s *strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.r.ValidateUpdate == nil {
		return nil
	}
	return s.r.ValidateUpdate(obj, old)
}

func (s *strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// GetResetFields tells server-side apply that the main endpoint owns no status fields.
func (s *strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if !s.r.HasStatus {
		return nil
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(s.r.GroupVersion().String()): fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// gracefulStrategy adds a Resource's grace-period rule to its strategy.
type gracefulStrategy struct{ *strategy }

func (s gracefulStrategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	return s.r.GracefulDelete(ctx, obj, options)
}

// statusStrategy is the update behaviour of a Resource's status subresource: only status changes.
type statusStrategy struct{ *strategy }

func (s statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	setField(obj, "Spec", getField(old, "Spec"))
	newMeta, err1 := meta.Accessor(obj)
	oldMeta, err2 := meta.Accessor(old)
	if err1 == nil && err2 == nil {
		newMeta.SetOwnerReferences(oldMeta.GetOwnerReferences())
	}
	if s.r.PrepareForStatusUpdate != nil {
		s.r.PrepareForStatusUpdate(ctx, obj, old)
	}
}

func (s statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.r.ValidateStatusUpdate == nil {
		return nil
	}
	return s.r.ValidateStatusUpdate(obj, old)
}

// GetResetFields tells server-side apply that the status endpoint owns nothing but status.
func (s statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(s.r.GroupVersion().String()): fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata", "ownerReferences"),
		),
	}
}

func hasField(obj runtime.Object, name string) bool {
	v := reflect.ValueOf(obj).Elem()
	return v.Kind() == reflect.Struct && v.FieldByName(name).IsValid()
}

func getField(obj runtime.Object, name string) reflect.Value {
	return reflect.ValueOf(obj).Elem().FieldByName(name)
}

func fieldType(obj runtime.Object, name string) reflect.Type {
	return getField(obj, name).Type()
}

func setField(obj runtime.Object, name string, value reflect.Value) {
	if f := getField(obj, name); f.IsValid() && f.CanSet() {
		f.Set(value)
	}
}
