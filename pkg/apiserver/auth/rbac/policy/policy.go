// Package policy reads RBAC manifests (the bootstrap roles and bindings rayctl ships) and applies them to
// an API server: each object is created, or updated when it differs from the manifest, so applying the
// same policy twice writes nothing.
package policy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// AutoupdateAnnotation set to "false" on a stored object keeps Apply from changing it, as on Kubernetes.
const AutoupdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"

// ReadFS returns the content of every *.yaml file in fsys, in name order.
func ReadFS(fsys fs.FS) ([][]byte, error) {
	var names []string
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			names = append(names, path)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([][]byte, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Parse decodes manifests (YAML, several documents each) into rbac.authorization.k8s.io/v1 Roles,
// ClusterRoles, RoleBindings and ClusterRoleBindings. Any other kind, or an unknown field, is an error.
func Parse(manifests ...[]byte) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, m := range manifests {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(m)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, err := decode(doc)
			if err != nil {
				return nil, err
			}
			if obj != nil {
				out = append(out, obj)
			}
		}
	}
	return out, nil
}

func decode(doc []byte) (runtime.Object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == "" && tm.Kind == "" {
		return nil, nil // only comments
	}
	if tm.APIVersion != rbacv1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("%s %s: only %s objects belong in an RBAC policy", tm.APIVersion, tm.Kind, rbacv1.SchemeGroupVersion)
	}
	var obj runtime.Object
	switch tm.Kind {
	case "ClusterRole":
		obj = &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		obj = &rbacv1.ClusterRoleBinding{}
	case "Role":
		obj = &rbacv1.Role{}
	case "RoleBinding":
		obj = &rbacv1.RoleBinding{}
	default:
		return nil, fmt.Errorf("kind %q does not belong in an RBAC policy", tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("reading a %s: %w", tm.Kind, err)
	}
	return obj, nil
}

// Apply makes the server hold each of objs: it creates what is missing and updates what differs in rules,
// role reference, subjects, labels or annotations (a binding whose role reference changed is replaced, as
// that field is immutable). Objects annotated AutoupdateAnnotation=false are left alone. It returns the
// objects as stored, with their resourceVersions.
func Apply(ctx context.Context, client kubernetes.Interface, objs []runtime.Object) ([]runtime.Object, error) {
	out := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		stored, err := apply(ctx, client, o)
		if err != nil {
			m, _ := o.(metav1.Object)
			return nil, fmt.Errorf("applying %T %s: %w", o, m.GetName(), err)
		}
		out = append(out, stored)
	}
	return out, nil
}

func apply(ctx context.Context, client kubernetes.Interface, o runtime.Object) (runtime.Object, error) {
	rbac := client.RbacV1()
	switch want := o.(type) {
	case *rbacv1.ClusterRole:
		api := rbac.ClusterRoles()
		return reconcile(ctx, want, api.Get, api.Create, api.Update, nil, func(have, want *rbacv1.ClusterRole) bool {
			return apiequality.Semantic.DeepEqual(have.Rules, want.Rules) && apiequality.Semantic.DeepEqual(have.AggregationRule, want.AggregationRule)
		}, func(have, want *rbacv1.ClusterRole) {
			have.Rules, have.AggregationRule = want.Rules, want.AggregationRule
		})
	case *rbacv1.Role:
		api := rbac.Roles(want.Namespace)
		return reconcile(ctx, want, api.Get, api.Create, api.Update, nil, func(have, want *rbacv1.Role) bool {
			return apiequality.Semantic.DeepEqual(have.Rules, want.Rules)
		}, func(have, want *rbacv1.Role) { have.Rules = want.Rules })
	case *rbacv1.ClusterRoleBinding:
		api := rbac.ClusterRoleBindings()
		return reconcile(ctx, want, api.Get, api.Create, api.Update, api.Delete, func(have, want *rbacv1.ClusterRoleBinding) bool {
			return have.RoleRef == want.RoleRef && apiequality.Semantic.DeepEqual(have.Subjects, want.Subjects)
		}, func(have, want *rbacv1.ClusterRoleBinding) { have.Subjects = want.Subjects })
	case *rbacv1.RoleBinding:
		api := rbac.RoleBindings(want.Namespace)
		return reconcile(ctx, want, api.Get, api.Create, api.Update, api.Delete, func(have, want *rbacv1.RoleBinding) bool {
			return have.RoleRef == want.RoleRef && apiequality.Semantic.DeepEqual(have.Subjects, want.Subjects)
		}, func(have, want *rbacv1.RoleBinding) { have.Subjects = want.Subjects })
	}
	return nil, fmt.Errorf("not an RBAC object: %T", o)
}

// object is the part of a typed RBAC object reconcile needs.
type object interface {
	runtime.Object
	metav1.Object
}

// reconcile is Apply for one object. same compares the content (not metadata), copy moves want's content
// onto the stored object. With del non-nil, content that update cannot change (a binding's roleRef) is
// fixed by deleting and creating again.
func reconcile[T object](ctx context.Context, want T,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
	del func(context.Context, string, metav1.DeleteOptions) error,
	same func(have, want T) bool, copyContent func(have, want T),
) (runtime.Object, error) {
	have, err := get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return create(ctx, want, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, err
	}
	if have.GetAnnotations()[AutoupdateAnnotation] == "false" {
		return have, nil
	}
	metaSame := contains(have.GetLabels(), want.GetLabels()) && contains(have.GetAnnotations(), want.GetAnnotations())
	if metaSame && same(have, want) {
		return have, nil
	}
	if del != nil && !roleRefSame(have, want) {
		uid := have.GetUID()
		if err := del(ctx, want.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		return create(ctx, want, metav1.CreateOptions{})
	}
	have.SetLabels(merged(have.GetLabels(), want.GetLabels()))
	have.SetAnnotations(merged(have.GetAnnotations(), want.GetAnnotations()))
	copyContent(have, want)
	return update(ctx, have, metav1.UpdateOptions{})
}

func roleRefSame(have, want runtime.Object) bool {
	switch h := have.(type) {
	case *rbacv1.ClusterRoleBinding:
		return h.RoleRef == want.(*rbacv1.ClusterRoleBinding).RoleRef
	case *rbacv1.RoleBinding:
		return h.RoleRef == want.(*rbacv1.RoleBinding).RoleRef
	}
	return true
}

// contains reports whether every key of want has the same value in have.
func contains(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func merged(have, want map[string]string) map[string]string {
	if len(want) == 0 {
		return have
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}
