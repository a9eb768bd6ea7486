// Package selfsubjectreview serves authentication.k8s.io/v1 SelfSubjectReviews (`kubectl auth whoami`).
package selfsubjectreview

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// REST answers who the requesting user is.
type REST struct{}

var _ rest.Creater = &REST{}

// New returns an empty SelfSubjectReview.
func (r *REST) New() runtime.Object { return &authenticationv1.SelfSubjectReview{} }

// Destroy does nothing.
func (r *REST) Destroy() {}

// NamespaceScoped is false.
func (r *REST) NamespaceScoped() bool { return false }

// GetSingularName returns the singular resource name.
func (r *REST) GetSingularName() string { return "selfsubjectreview" }

// GroupVersionKind returns the served kind.
func (r *REST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview")
}

// Create fills status with the requesting user's identity.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	review := obj.(*authenticationv1.SelfSubjectReview)
	extra := map[string]authenticationv1.ExtraValue{}
	for k, v := range u.GetExtra() {
		extra[k] = v
	}
	review.Status.UserInfo = authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: extra}
	return review, nil
}
