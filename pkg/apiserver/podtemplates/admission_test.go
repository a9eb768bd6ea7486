package podtemplates

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/rayctl/rayctl/configs"
)

// rayClusterCreate is the admission of a RayCluster whose head's template has a container port that
// is not a number.
func rayClusterCreate() admission.Attributes {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": map[string]any{"name": "c", "namespace": "default"},
		"spec": map[string]any{"headGroupSpec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "ray-head", "image": "rayproject/ray:2.60.0",
				"ports": []any{map[string]any{"containerPort": "not-a-number"}}}},
		}}}},
	}}
	gvr := schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
	return admission.NewAttributesRecord(obj, nil, obj.GroupVersionKind(), "default", "c", gvr, "", admission.Create,
		&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "test"})
}

// TestManifestsReadWhenFirstNeeded: the manifests are read on the first write of a pod template, once,
// and the template is checked against the full schema they hold.
func TestManifestsReadWhenFirstNeeded(t *testing.T) {
	reads := 0
	a := NewAdmission(func() ([][]byte, error) {
		reads++
		return configs.CRDManifests(configs.RayGroup)
	})
	if reads != 0 {
		t.Fatalf("manifests read %d times before any write", reads)
	}
	for range 2 {
		err := a.Validate(context.Background(), rayClusterCreate(), nil)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.headGroupSpec.template.spec.containers[0].ports[0].containerPort") {
			t.Errorf("Validate = %v, want Invalid naming the container port", err)
		}
	}
	if reads != 1 {
		t.Errorf("manifests read %d times for two writes, want once", reads)
	}
}

// TestManifestsUnreadable: a template write is refused, with the reason, when the manifests cannot be read.
func TestManifestsUnreadable(t *testing.T) {
	a := NewAdmission(func() ([][]byte, error) { return nil, errors.New("no manifests today") })
	err := a.Validate(context.Background(), rayClusterCreate(), nil)
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "no manifests today") {
		t.Errorf("Validate = %v, want an internal error with the reason", err)
	}
}
