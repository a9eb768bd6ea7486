package podtemplates

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"

	"github.com/rayctl/rayctl/configs"
)

// Templates are the paths of the PodTemplateSpecs in each ray.io/v1 resource ("[]" steps into every item
// of a list), as KubeRay's CRDs have them (a test checks them against configs/crds).
var Templates = map[schema.GroupResource][]string{
	{Group: "ray.io", Resource: "rayclusters"}: {"spec.headGroupSpec.template", "spec.workerGroupSpecs[].template"},
	{Group: "ray.io", Resource: "rayjobs"}: {"spec.rayClusterSpec.headGroupSpec.template", "spec.rayClusterSpec.workerGroupSpecs[].template",
		"spec.submitterPodTemplate"},
	{Group: "ray.io", Resource: "rayservices"}: {"spec.rayClusterConfig.headGroupSpec.template", "spec.rayClusterConfig.workerGroupSpecs[].template"},
	{Group: "ray.io", Resource: "raycronjobs"}: {"spec.jobTemplate.rayClusterSpec.headGroupSpec.template",
		"spec.jobTemplate.rayClusterSpec.workerGroupSpecs[].template", "spec.jobTemplate.submitterPodTemplate"},
}

// Admission does to the pod templates of ray.io objects what apiextensions did with their full schema:
// on create and update it prunes their unknown fields (an error under fieldValidation=Strict, a warning
// under Warn, as apiextensions reports them), drops nulls and applies the schema's defaults (Admit), and
// validates them (Validate), with the field paths apiextensions gives. An update that leaves a template as
// it was is not checked again (as apiextensions' validation ratcheting lets unchanged fields be).
type Admission struct {
	*admission.Handler
	schema func() (*templateSchema, error)
}

var (
	_ admission.MutationInterface   = (*Admission)(nil)
	_ admission.ValidationInterface = (*Admission)(nil)
)

// NewAdmission returns the plugin. On the first write of a pod template, manifests is called for CRD
// manifests (YAML) and the full PodTemplateSpec schema is read from the first of them that embeds one:
// reading and building it costs about as much as one of the templates apiextensions no longer builds.
// Until then nothing of them is kept; nil manifests leaves every template write refused.
func NewAdmission(manifests func() ([][]byte, error)) *Admission {
	return &Admission{
		Handler: admission.NewHandler(admission.Create, admission.Update),
		schema: sync.OnceValues(func() (*templateSchema, error) {
			if manifests == nil {
				return loadSchema(nil)
			}
			m, err := manifests()
			if err != nil {
				return nil, err
			}
			return loadSchema(m)
		}),
	}
}

// templateSchema is the full PodTemplateSpec schema in the forms the checks need.
type templateSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

// loadSchema builds the templateSchema from the first manifest that embeds a PodTemplateSpec.
func loadSchema(manifests [][]byte) (*templateSchema, error) {
	for _, m := range manifests {
		m, err := configs.ManifestJSON(m)
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(m, []byte(`"containers"`)) {
			continue
		}
		crd, err := configs.DecodeCRD(m)
		if err != nil {
			return nil, err
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil {
				continue
			}
			for _, s := range Find(v.Schema.OpenAPIV3Schema) {
				return newTemplateSchema(s)
			}
		}
	}
	return nil, fmt.Errorf("no CRD manifest embeds a PodTemplateSpec")
}

func newTemplateSchema(v1 *apiextensionsv1.JSONSchemaProps) (*templateSchema, error) {
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, internal, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, err
	}
	return &templateSchema{structural: structural, validator: validator}, nil
}

// Admit prunes, cleans and defaults the pod templates of a ray.io object being created or updated.
func (a *Admission) Admit(ctx context.Context, attrs admission.Attributes, _ admission.ObjectInterfaces) error {
	paths, obj := a.applies(attrs)
	if obj == nil {
		return nil
	}
	var templates []located
	for _, p := range paths {
		templates = append(templates, locate(obj.Object, p)...)
	}
	if len(templates) == 0 {
		return nil
	}
	s, err := a.schema()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	var unknown []error
	for _, t := range templates {
		opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true, ParentPath: []string{t.path.String()}}
		for _, p := range structuralpruning.PruneWithOptions(t.value, s.structural, false, opts) {
			unknown = append(unknown, fmt.Errorf("unknown field %q", p))
		}
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(t.value, s.structural)
		structuraldefaulting.Default(t.value, s.structural)
	}
	if len(unknown) == 0 {
		return nil
	}
	switch fieldValidation(attrs) {
	case metav1.FieldValidationStrict:
		gvk := attrs.GetKind()
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, runtime.NewStrictDecodingError(unknown)))
	case metav1.FieldValidationIgnore:
	default:
		for _, e := range unknown {
			warning.AddWarning(ctx, "", e.Error())
		}
	}
	return nil
}

// Validate checks the pod templates of a ray.io object being created or updated against the full schema.
func (a *Admission) Validate(_ context.Context, attrs admission.Attributes, _ admission.ObjectInterfaces) error {
	paths, obj := a.applies(attrs)
	if obj == nil {
		return nil
	}
	var old map[string]any
	if o, ok := attrs.GetOldObject().(*unstructured.Unstructured); ok && o != nil {
		old = o.Object
	}
	var errs field.ErrorList
	var s *templateSchema
	for _, p := range paths {
		for _, t := range locate(obj.Object, p) {
			if old != nil && unchanged(old, t) {
				continue
			}
			if s == nil {
				var err error
				if s, err = a.schema(); err != nil {
					return apierrors.NewInternalError(err)
				}
			}
			errs = append(errs, fullPaths(t.path, apiservervalidation.ValidateCustomResource(t.path, t.value, s.validator))...)
			if m, ok := t.value.(map[string]any); ok {
				errs = append(errs, structurallisttype.ValidateListSetsAndMaps(t.path, s.structural, m)...)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(attrs.GetKind().GroupKind(), attrs.GetName(), errs)
}

// fullPaths rewrites the messages of errs, found in the template at path, that name a field by its path in
// the template ("spec.containers[0].image in body must be …") to name it from the object's root, as
// apiextensions' messages do.
func fullPaths(path *field.Path, errs field.ErrorList) field.ErrorList {
	prefix := path.String() + "."
	for _, e := range errs {
		if rel, ok := strings.CutPrefix(e.Field, prefix); ok && strings.HasPrefix(e.Detail, rel+" ") {
			e.Detail = prefix + e.Detail
		}
	}
	return errs
}

// applies returns the template paths of attrs' resource and its object, or a nil object when the
// request is not a write of a ray.io object with templates.
func (a *Admission) applies(attrs admission.Attributes) ([]string, *unstructured.Unstructured) {
	if attrs.GetSubresource() != "" {
		return nil, nil
	}
	paths := Templates[attrs.GetResource().GroupResource()]
	if len(paths) == 0 {
		return nil, nil
	}
	obj, ok := attrs.GetObject().(*unstructured.Unstructured)
	if !ok || obj == nil {
		return nil, nil
	}
	return paths, obj
}

// fieldValidation is the request's fieldValidation directive (Warn when it gives none, as the API server
// reads it).
func fieldValidation(attrs admission.Attributes) string {
	var v string
	switch o := attrs.GetOperationOptions().(type) {
	case *metav1.CreateOptions:
		v = o.FieldValidation
	case *metav1.UpdateOptions:
		v = o.FieldValidation
	case *metav1.PatchOptions:
		v = o.FieldValidation
	}
	if v == "" {
		return metav1.FieldValidationWarn
	}
	return v
}

// located is a template found in an object: its value and where.
type located struct {
	path  *field.Path
	steps []step
	value any
}

// step is one step of a located path: a field name, or an index when name is empty.
type step struct {
	name  string
	index int
}

// locate returns the values at path in obj (every item of a list where it says "[]"); an absent or null
// value is not returned.
func locate(obj map[string]any, path string) []located {
	found := []located{{value: obj}}
	for _, part := range strings.Split(path, ".") {
		name, each := strings.CutSuffix(part, "[]")
		var next []located
		for _, l := range found {
			m, ok := l.value.(map[string]any)
			if !ok || m[name] == nil {
				continue
			}
			l.steps = append(append([]step(nil), l.steps...), step{name: name})
			if !each {
				next = append(next, located{steps: l.steps, value: m[name]})
				continue
			}
			items, _ := m[name].([]any)
			for i, item := range items {
				if item != nil {
					next = append(next, located{steps: append(append([]step(nil), l.steps...), step{index: i}), value: item})
				}
			}
		}
		found = next
	}
	for i := range found {
		var p *field.Path
		for _, s := range found[i].steps {
			switch {
			case p == nil:
				p = field.NewPath(s.name)
			case s.name == "":
				p = p.Index(s.index)
			default:
				p = p.Child(s.name)
			}
		}
		found[i].path = p
	}
	return found
}

// unchanged reports whether old holds t's value at t's place.
func unchanged(old map[string]any, t located) bool {
	var cur any = old
	for _, s := range t.steps {
		if s.name == "" {
			items, ok := cur.([]any)
			if !ok || s.index >= len(items) {
				return false
			}
			cur = items[s.index]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		cur = m[s.name]
	}
	return equality.Semantic.DeepEqual(cur, t.value)
}
