package serviceaccount

import (
	"context"
	"fmt"
	"math"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	satoken "github.com/rayctl/rayctl/pkg/apiserver/auth/serviceaccount"
)

// Token lifetimes, as kube-apiserver bounds them: at least ten minutes, an hour when unsaid.
const (
	minTokenLifetime     = 10 * time.Minute
	defaultTokenLifetime = time.Hour
)

// TokenREST is serviceaccounts/token: TokenRequest, which issues a token for the ServiceAccount, optionally
// bound to a Pod that runs as it.
type TokenREST struct {
	// ServiceAccounts and Pods read the objects a token is issued for.
	ServiceAccounts, Pods rest.Getter
	// Issuer signs the tokens.
	Issuer *satoken.Issuer
}

var (
	_ rest.NamedCreater             = &TokenREST{}
	_ rest.GroupVersionKindProvider = &TokenREST{}
	_ rest.SingularNameProvider     = &TokenREST{}
)

var (
	tokenRequestKind      = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
	tokenRequestGroupKind = tokenRequestKind.GroupKind()
)

// New returns an empty TokenRequest.
func (r *TokenREST) New() runtime.Object { return &authenticationv1.TokenRequest{} }

// Destroy does nothing: the ServiceAccount store owns the storage.
func (r *TokenREST) Destroy() {}

// GroupVersionKind says the subresource speaks authentication.k8s.io/v1 TokenRequest.
func (r *TokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return tokenRequestKind
}

// GetSingularName returns the singular name of the subresource's kind.
func (r *TokenREST) GetSingularName() string { return "token" }

// Create issues a token for the ServiceAccount called name.
func (r *TokenREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req := obj.(*authenticationv1.TokenRequest)
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestGroupKind, name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	got, err := r.ServiceAccounts.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sa := got.(*corev1.ServiceAccount)
	issue := satoken.Request{ServiceAccount: sa, Audiences: req.Spec.Audiences, Lifetime: defaultTokenLifetime}
	if req.Spec.ExpirationSeconds != nil {
		issue.Lifetime = time.Duration(*req.Spec.ExpirationSeconds) * time.Second
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if issue.Pod, err = r.boundPod(ctx, sa, ref); err != nil {
			return nil, err
		}
	}
	token, claims, err := r.Issuer.Issue(issue)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := req.DeepCopy()
	out.Name, out.Namespace = sa.Name, sa.Namespace
	out.Spec.Audiences = []string(claims.Audience)
	lifetime := int64(issue.Lifetime / time.Second)
	out.Spec.ExpirationSeconds = &lifetime
	out.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(claims.ExpiresAt.Time)}
	return out, nil
}

// boundPod is the pod ref names, which must run as sa (and have ref's UID, when ref gives one).
func (r *TokenREST) boundPod(ctx context.Context, sa *corev1.ServiceAccount, ref *authenticationv1.BoundObjectReference) (*corev1.Pod, error) {
	got, err := r.Pods.Get(ctx, ref.Name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod := got.(*corev1.Pod)
	path := field.NewPath("spec", "boundObjectRef")
	switch {
	case ref.UID != "" && ref.UID != pod.UID:
		return nil, apierrors.NewConflict(corev1.Resource("pods"), ref.Name, fmt.Errorf("the pod's UID is %s, not %s", pod.UID, ref.UID))
	case pod.Spec.ServiceAccountName != sa.Name:
		return nil, apierrors.NewInvalid(tokenRequestGroupKind, sa.Name, field.ErrorList{field.Invalid(path.Child("name"), ref.Name,
			fmt.Sprintf("pod %s runs as service account %q, not %q", pod.Name, pod.Spec.ServiceAccountName, sa.Name))})
	case pod.DeletionTimestamp != nil:
		return nil, apierrors.NewInvalid(tokenRequestGroupKind, sa.Name, field.ErrorList{field.Invalid(path.Child("name"), ref.Name, "the pod is being deleted")})
	}
	return pod, nil
}

// validateTokenRequest checks what a TokenRequest asks for.
func validateTokenRequest(req *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if s := req.Spec.ExpirationSeconds; s != nil {
		switch {
		case *s < int64(minTokenLifetime/time.Second):
			errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, "may not specify a duration less than 10 minutes"))
		case *s > math.MaxUint32:
			errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, fmt.Sprintf("may not be more than %d seconds", uint32(math.MaxUint32))))
		}
	}
	for i, a := range req.Spec.Audiences {
		if a == "" {
			errs = append(errs, field.Required(spec.Child("audiences").Index(i), "an audience may not be empty"))
		}
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		path := spec.Child("boundObjectRef")
		if ref.Kind != "Pod" {
			errs = append(errs, field.NotSupported(path.Child("kind"), ref.Kind, []string{"Pod"}))
		}
		if ref.APIVersion != "" && ref.APIVersion != "v1" {
			errs = append(errs, field.NotSupported(path.Child("apiVersion"), ref.APIVersion, []string{"v1"}))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(path.Child("name"), ""))
		}
	}
	return errs
}
