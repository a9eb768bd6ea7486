// Package serviceaccount issues and checks ServiceAccount tokens: JWTs signed with the data dir's
// service-account key (ES256), bound to a ServiceAccount and optionally a Pod, with an audience and an
// expiry, as kube-apiserver's TokenRequest issues them. A token stops working when it expires, or when the
// ServiceAccount (or the Pod) it is bound to is gone or has been made anew under the same name.
package serviceaccount

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	sainfo "k8s.io/apiserver/pkg/authentication/serviceaccount"
	jwtcred "k8s.io/apiserver/pkg/authentication/token/jwt"
)

// DefaultIssuer is the tokens' issuer, and the audience of the API server itself, as on a cluster whose
// kube-apiserver runs with its defaults.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Claims are a token's claims: the registered ones and Kubernetes' private "kubernetes.io" claim.
type Claims struct {
	jwt.RegisteredClaims
	Kubernetes PrivateClaims `json:"kubernetes.io"`
}

// PrivateClaims say what a token is bound to.
type PrivateClaims struct {
	Namespace      string `json:"namespace"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
}

// Ref names an object and its UID.
type Ref struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// Request is what a token is issued for.
type Request struct {
	// ServiceAccount is the account the token authenticates as.
	ServiceAccount *corev1.ServiceAccount
	// Pod, when set, binds the token to a pod: it stops working when the pod is gone.
	Pod *corev1.Pod
	// Audiences are the token's audiences (the API server's own when empty).
	Audiences []string
	// Lifetime is how long the token is valid.
	Lifetime time.Duration
}

// Issuer signs tokens.
type Issuer struct {
	// Key signs tokens; Authenticator checks them with its public half.
	Key *ecdsa.PrivateKey
	// Name is the iss claim (DefaultIssuer when empty).
	Name string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Issue signs a token for r and returns it with its expiry and its claims.
func (i *Issuer) Issue(r Request) (string, *Claims, error) {
	now := time.Now
	if i.Now != nil {
		now = i.Now
	}
	t := now().Truncate(time.Second)
	aud := r.Audiences
	if len(aud) == 0 {
		aud = []string{i.issuer()}
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", nil, err
	}
	sa := r.ServiceAccount
	c := &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.issuer(),
			Subject:   sainfo.MakeUsername(sa.Namespace, sa.Name),
			Audience:  aud,
			IssuedAt:  jwt.NewNumericDate(t),
			NotBefore: jwt.NewNumericDate(t),
			ExpiresAt: jwt.NewNumericDate(t.Add(r.Lifetime)),
			ID:        hex.EncodeToString(id),
		},
		Kubernetes: PrivateClaims{Namespace: sa.Namespace, ServiceAccount: Ref{Name: sa.Name, UID: sa.UID}},
	}
	if r.Pod != nil {
		c.Kubernetes.Pod = &Ref{Name: r.Pod.Name, UID: r.Pod.UID}
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodES256, c).SignedString(i.Key)
	return signed, c, err
}

func (i *Issuer) issuer() string {
	if i.Name == "" {
		return DefaultIssuer
	}
	return i.Name
}

// Objects reads the objects tokens are bound to, as stored now.
type Objects interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// Authenticator accepts tokens Issuer signed for one of Audiences, whose objects still exist.
type Authenticator struct {
	// Key is the public half of the Issuer's key.
	Key *ecdsa.PublicKey
	// Name is the issuer expected (DefaultIssuer when empty).
	Name string
	// Objects looks up the ServiceAccount and Pod a token names.
	Objects Objects
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

var _ authenticator.Token = &Authenticator{}

// errNotOurs says a bearer token is not a token this issuer signed; other token authenticators may try it.
var errNotOurs = errors.New("not a service account token of this cluster")

// AuthenticateToken checks a bearer token. A token that is not a JWT of this issuer is not
// authenticated (no error); one that is, but is expired, for another audience or bound to objects that
// are gone, is an error, answered 401.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	iss := a.Name
	if iss == "" {
		iss = DefaultIssuer
	}
	// The audiences accepted are the request context's (the API server puts its APIAudiences there for
	// every request; a TokenReview its spec.audiences), else the issuer alone.
	fromCtx, _ := authenticator.AudiencesFrom(ctx)
	aud := []string(fromCtx)
	if len(aud) == 0 {
		aud = []string{iss}
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg()}), jwt.WithIssuer(iss),
		jwt.WithAudience(aud...), jwt.WithExpirationRequired(), jwt.WithLeeway(time.Minute)}
	if a.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(a.Now))
	}
	c := &Claims{}
	if _, err := jwt.NewParser(opts...).ParseWithClaims(token, c, func(*jwt.Token) (any, error) { return a.Key, nil }); err != nil {
		if errors.Is(err, jwt.ErrTokenMalformed) || errors.Is(err, jwt.ErrTokenSignatureInvalid) ||
			errors.Is(err, jwt.ErrTokenUnverifiable) || errors.Is(err, jwt.ErrTokenInvalidIssuer) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("service account token: %w", err)
	}
	k := c.Kubernetes
	if k.Namespace == "" || k.ServiceAccount.Name == "" || c.Subject != sainfo.MakeUsername(k.Namespace, k.ServiceAccount.Name) {
		return nil, false, errors.New("service account token: claims do not name a service account")
	}
	sa, err := a.Objects.ServiceAccount(ctx, k.Namespace, k.ServiceAccount.Name)
	if err := bound("service account", k.Namespace, k.ServiceAccount, sa, err); err != nil {
		return nil, false, err
	}
	info := &sainfo.ServiceAccountInfo{Name: sa.Name, Namespace: sa.Namespace, UID: string(sa.UID), CredentialID: jwtcred.CredentialIDForJTI(c.ID)}
	if k.Pod != nil {
		pod, err := a.Objects.Pod(ctx, k.Namespace, k.Pod.Name)
		if err := bound("pod", k.Namespace, *k.Pod, pod, err); err != nil {
			return nil, false, err
		}
		if pod.DeletionTimestamp != nil {
			return nil, false, fmt.Errorf("service account token: pod %s/%s is being deleted", k.Namespace, k.Pod.Name)
		}
		if pod.Spec.ServiceAccountName != sa.Name {
			return nil, false, fmt.Errorf("service account token: pod %s/%s does not run as service account %s", k.Namespace, pod.Name, sa.Name)
		}
		info.PodName, info.PodUID = pod.Name, string(pod.UID)
		info.NodeName = pod.Spec.NodeName
	}
	var auds authenticator.Audiences
	for _, x := range c.Audience {
		if slices.Contains(aud, x) {
			auds = append(auds, x)
		}
	}
	return &authenticator.Response{User: info.UserInfo(), Audiences: auds}, true, nil
}

// bound checks that the object a token names exists with the UID the token names.
func bound[T interface{ GetUID() types.UID }](what, namespace string, ref Ref, obj T, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("service account token: %s %s/%s no longer exists", what, namespace, ref.Name)
	case err != nil:
		return fmt.Errorf("service account token: looking up %s %s/%s: %w", what, namespace, ref.Name, err)
	case obj.GetUID() != ref.UID:
		return fmt.Errorf("service account token: %s %s/%s was deleted and made anew (UID %s, the token's %s)", what, namespace, ref.Name, obj.GetUID(), ref.UID)
	}
	return nil
}
