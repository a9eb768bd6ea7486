package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// templatePatch is a ControllerRevision's data for a pod template: a strategic merge patch that puts
// the template back in place, which is how `kubectl rollout undo` applies a revision.
func templatePatch(t *corev1.PodTemplateSpec) ([]byte, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": m}})
}

// TemplateOf reads the pod template a ControllerRevision holds.
func TemplateOf(rev *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("controllerrevision %s: %w", rev.Name, err)
	}
	return &data.Spec.Template, nil
}

func sameData(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && apiequality.Semantic.DeepEqual(x, y)
}

// Revisions are an owner's ControllerRevisions, oldest revision first, and the one of its current
// template.
type Revisions struct {
	All    []*appsv1.ControllerRevision
	Update *appsv1.ControllerRevision
}

// Find returns the revision named name, or nil.
func (r *Revisions) Find(name string) *appsv1.ControllerRevision {
	for _, rev := range r.All {
		if rev.Name == name {
			return rev
		}
	}
	return nil
}

// SyncRevisions makes sure owner's current template has a ControllerRevision numbered above every other
// (an earlier revision with the same template is renumbered, as after an undo), labelled with the
// template's labels so that kubectl finds it by the owner's selector.
func SyncRevisions(ctx context.Context, c client.Client, reader client.Reader, owner client.Object, ownerKind schema.GroupVersionKind, t *corev1.PodTemplateSpec, collisionCount *int32) (*Revisions, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(owner.GetNamespace())); err != nil {
		return nil, err
	}
	out := &Revisions{}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], owner) {
			out.All = append(out.All, &list.Items[i])
		}
	}
	sort.Slice(out.All, func(i, j int) bool { return out.All[i].Revision < out.All[j].Revision })
	data, err := templatePatch(t)
	if err != nil {
		return nil, err
	}
	var top int64
	for _, rev := range out.All {
		top = max(top, rev.Revision)
	}
	for _, rev := range out.All {
		if !sameData(rev.Data.Raw, data) {
			continue
		}
		if rev.Revision < top {
			updated := rev.DeepCopy()
			updated.Revision = top + 1
			if err := c.Update(ctx, updated); err != nil {
				return nil, err
			}
			*rev = *updated
		}
		out.Update = rev
		return out, nil
	}
	hash := TemplateHash(t, collisionCount)
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            owner.GetName() + "-" + hash,
			Namespace:       owner.GetNamespace(),
			Labels:          maps.Clone(t.Labels),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, ownerKind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: top + 1,
	}
	if rev.Labels == nil {
		rev.Labels = map[string]string{}
	}
	rev.Labels[appsv1.ControllerRevisionHashLabelKey] = hash
	if err := c.Create(ctx, rev); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		// The cache had not shown it yet: read it from the API server.
		if err := reader.Get(ctx, client.ObjectKeyFromObject(rev), rev); err != nil {
			return nil, err
		}
		if !metav1.IsControlledBy(rev, owner) || !sameData(rev.Data.Raw, data) {
			return nil, fmt.Errorf("controllerrevision %s exists with another template", rev.Name)
		}
	}
	out.All = append(out.All, rev)
	out.Update = rev
	return out, nil
}

// TrimRevisions deletes the oldest revisions beyond limit that no live pod or status names.
func TrimRevisions(ctx context.Context, c client.Client, revs *Revisions, limit int32, live map[string]bool) error {
	var dead []*appsv1.ControllerRevision
	for _, rev := range revs.All {
		if !live[rev.Name] && rev != revs.Update {
			dead = append(dead, rev)
		}
	}
	for i := 0; i < len(dead)-int(limit); i++ {
		if err := c.Delete(ctx, dead[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
