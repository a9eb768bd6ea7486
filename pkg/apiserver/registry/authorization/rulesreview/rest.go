// Package rulesreview serves authorization.k8s.io/v1 SelfSubjectRulesReviews (`kubectl auth can-i --list`):
// each create lists what the requesting user may do in a namespace, as the server's rule resolver sees it
// (nothing is stored).
package rulesreview

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// REST answers SelfSubjectRulesReviews from Resolver.
type REST struct {
	Resolver authorizer.RuleResolver
}

var (
	_ rest.Creater                  = &REST{}
	_ rest.SingularNameProvider     = &REST{}
	_ rest.GroupVersionKindProvider = &REST{}
)

// New returns an empty SelfSubjectRulesReview.
func (r *REST) New() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }

// Destroy does nothing.
func (r *REST) Destroy() {}

// NamespaceScoped is false: reviews are cluster-scoped (the namespace is in the spec).
func (r *REST) NamespaceScoped() bool { return false }

// GetSingularName returns the singular resource name.
func (r *REST) GetSingularName() string { return "selfsubjectrulesreview" }

// GroupVersionKind returns the served kind.
func (r *REST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview")
}

// Create fills status with the requesting user's rules in spec.namespace.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	review := obj.(*authorizationv1.SelfSubjectRulesReview)
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	if review.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	res, nonRes, incomplete, err := r.Resolver.RulesFor(ctx, u, review.Spec.Namespace)
	status := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    make([]authorizationv1.ResourceRule, 0, len(res)),
		NonResourceRules: make([]authorizationv1.NonResourceRule, 0, len(nonRes)),
		Incomplete:       incomplete,
	}
	for _, rule := range res {
		status.ResourceRules = append(status.ResourceRules, authorizationv1.ResourceRule{
			Verbs: rule.GetVerbs(), APIGroups: rule.GetAPIGroups(), Resources: rule.GetResources(), ResourceNames: rule.GetResourceNames(),
		})
	}
	for _, rule := range nonRes {
		status.NonResourceRules = append(status.NonResourceRules, authorizationv1.NonResourceRule{
			Verbs: rule.GetVerbs(), NonResourceURLs: rule.GetNonResourceURLs(),
		})
	}
	if err != nil {
		status.EvaluationError = err.Error()
	}
	review.Status = status
	return review, nil
}
