// Package accessreview serves authorization.k8s.io/v1 SubjectAccessReviews and SelfSubjectAccessReviews:
// each create asks the server's own authorizer and returns its answer in status (nothing is stored).
package accessreview

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// SubjectREST answers SubjectAccessReviews: may the named user do this?
type SubjectREST struct {
	Authorizer authorizer.Authorizer
}

// SelfREST answers SelfSubjectAccessReviews: may I do this?
type SelfREST struct {
	Authorizer authorizer.Authorizer
}

var (
	_ rest.Creater                  = &SubjectREST{}
	_ rest.Creater                  = &SelfREST{}
	_ rest.SingularNameProvider     = &SubjectREST{}
	_ rest.Scoper                   = &SelfREST{}
	_ rest.GroupVersionKindProvider = &SelfREST{}
)

// New returns an empty SubjectAccessReview.
func (r *SubjectREST) New() runtime.Object { return &authorizationv1.SubjectAccessReview{} }

// Destroy does nothing.
func (r *SubjectREST) Destroy() {}

// NamespaceScoped is false: reviews are cluster-scoped.
func (r *SubjectREST) NamespaceScoped() bool { return false }

// GetSingularName returns the singular resource name.
func (r *SubjectREST) GetSingularName() string { return "subjectaccessreview" }

// GroupVersionKind returns the served kind.
func (r *SubjectREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview")
}

// Create evaluates the review for spec.user, spec.groups and spec.uid.
func (r *SubjectREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	review := obj.(*authorizationv1.SubjectAccessReview)
	if review.Spec.User == "" && len(review.Spec.Groups) == 0 {
		return nil, apierrors.NewBadRequest("at least one of user or group must be specified")
	}
	if err := validateSpec(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes); err != nil {
		return nil, err
	}
	extra := map[string][]string{}
	for k, v := range review.Spec.Extra {
		extra[k] = v
	}
	u := &user.DefaultInfo{Name: review.Spec.User, Groups: review.Spec.Groups, UID: review.Spec.UID, Extra: extra}
	review.Status = evaluate(ctx, r.Authorizer, u, review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes)
	return review, nil
}

// New returns an empty SelfSubjectAccessReview.
func (r *SelfREST) New() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }

// Destroy does nothing.
func (r *SelfREST) Destroy() {}

// NamespaceScoped is false: reviews are cluster-scoped.
func (r *SelfREST) NamespaceScoped() bool { return false }

// GetSingularName returns the singular resource name.
func (r *SelfREST) GetSingularName() string { return "selfsubjectaccessreview" }

// GroupVersionKind returns the served kind.
func (r *SelfREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview")
}

// Create evaluates the review for the requesting user.
func (r *SelfREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	review := obj.(*authorizationv1.SelfSubjectAccessReview)
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	if err := validateSpec(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes); err != nil {
		return nil, err
	}
	review.Status = evaluate(ctx, r.Authorizer, u, review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes)
	return review, nil
}

func validateSpec(res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) error {
	if (res == nil) == (nonRes == nil) {
		return apierrors.NewBadRequest("exactly one of resourceAttributes and nonResourceAttributes must be specified")
	}
	return nil
}

func evaluate(ctx context.Context, authz authorizer.Authorizer, u user.Info, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	attrs := authorizer.AttributesRecord{User: u}
	if res != nil {
		attrs.ResourceRequest = true
		attrs.Verb = res.Verb
		attrs.Namespace = res.Namespace
		attrs.APIGroup = res.Group
		attrs.APIVersion = res.Version
		attrs.Resource = res.Resource
		attrs.Subresource = res.Subresource
		attrs.Name = res.Name
	} else {
		attrs.Verb = nonRes.Verb
		attrs.Path = nonRes.Path
	}
	decision, reason, err := authz.Authorize(ctx, attrs)
	status := authorizationv1.SubjectAccessReviewStatus{
		Allowed: decision == authorizer.DecisionAllow,
		Denied:  decision == authorizer.DecisionDeny,
		Reason:  reason,
	}
	if err != nil {
		status.EvaluationError = fmt.Sprint(err)
	}
	return status
}
