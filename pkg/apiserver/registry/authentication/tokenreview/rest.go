// Package tokenreview serves authentication.k8s.io/v1 TokenReviews: each create asks the server's own
// bearer-token authenticator about spec.token and answers in status, as kube-apiserver does (nothing is
// stored). Ray's Kubernetes-delegated token authentication (RAY_ENABLE_K8S_TOKEN_AUTH) reviews its
// callers' tokens here.
package tokenreview

import (
	"context"
	"errors"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// errAudiences is kube-apiserver's answer when the authenticator authenticated a token for none of the
// audiences asked about: an authenticator that ignores audiences, a server fault rather than the token's.
var errAudiences = errors.New("error validating audience")

// REST answers TokenReviews with Authenticator, the server's bearer-token authenticator (it reads the
// token from a request's Authorization header).
type REST struct {
	// Authenticator authenticates the bearer token of a request.
	Authenticator authenticator.Request
	// APIAudiences are the server's own audiences: a review naming none asks about these.
	APIAudiences authenticator.Audiences
}

var (
	_ rest.Creater                  = &REST{}
	_ rest.SingularNameProvider     = &REST{}
	_ rest.GroupVersionKindProvider = &REST{}
)

// New returns an empty TokenReview.
func (r *REST) New() runtime.Object { return &authenticationv1.TokenReview{} }

// Destroy does nothing.
func (r *REST) Destroy() {}

// NamespaceScoped is false: reviews are cluster-scoped.
func (r *REST) NamespaceScoped() bool { return false }

// GetSingularName returns the singular resource name.
func (r *REST) GetSingularName() string { return "tokenreview" }

// GroupVersionKind returns the served kind.
func (r *REST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authenticationv1.SchemeGroupVersion.WithKind("TokenReview")
}

// Create authenticates spec.token for spec.audiences (the server's own when none): status.authenticated
// and the user, with the audiences of spec.audiences the token is valid for; a token the authenticator
// rejects (expired, for another audience, bound to an object that is gone) is not authenticated and its
// reason is status.error.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*authenticationv1.TokenReview)
	if !ok {
		return nil, apierrors.NewBadRequest("not a TokenReview")
	}
	if ns := genericapirequest.NamespaceValue(ctx); ns != "" {
		return nil, apierrors.NewBadRequest("namespace is not allowed on this type: " + ns)
	}
	if review.Spec.Token == "" {
		return nil, apierrors.NewInvalid(authenticationv1.SchemeGroupVersion.WithKind("TokenReview").GroupKind(), "",
			field.ErrorList{field.Required(field.NewPath("spec", "token"), "the token to review")})
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	auds := authenticator.Audiences(review.Spec.Audiences)
	if len(auds) == 0 {
		auds = r.APIAudiences
	}
	req, err := http.NewRequestWithContext(authenticator.WithAudiences(ctx, auds), http.MethodPost, "/", nil)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	req.Header.Set("Authorization", "Bearer "+review.Spec.Token)
	resp, authenticated, err := r.Authenticator.AuthenticateRequest(req)
	review.Status = authenticationv1.TokenReviewStatus{Authenticated: authenticated}
	if err != nil {
		review.Status.Error = err.Error()
	}
	if !authenticated || resp == nil || resp.User == nil {
		review.Status.Authenticated = false
		return review, nil
	}
	if len(auds) > 0 && len(auds.Intersect(resp.Audiences)) == 0 {
		return nil, apierrors.NewInternalError(errAudiences)
	}
	u := resp.User
	extra := map[string]authenticationv1.ExtraValue{}
	for k, v := range u.GetExtra() {
		extra[k] = v
	}
	review.Status.User = authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: extra}
	review.Status.Audiences = resp.Audiences
	return review, nil
}
