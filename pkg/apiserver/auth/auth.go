// Package auth decides who a request comes from and what it may do. Identities come from client
// certificates signed by rayctl's CA (the subject's common name is the user, its organizations the groups)
// and from bearer tokens the given token authenticators accept (ServiceAccount tokens, for pods).
// A request without either is anonymous, and anonymous requests reach only the public health and version
// paths; everything else answers 401.
package auth

import (
	"crypto/x509"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	requestunion "k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/path"
	"k8s.io/apiserver/pkg/authorization/union"
)

// PublicPaths are the paths anyone may read without credentials, as on a real cluster.
var PublicPaths = []string{"/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*", "/version", "/version/"}

// NewBearerAuthenticator authenticates a request's bearer token alone with tokens (in order), adding
// system:authenticated to the groups as NewAuthenticator does: what a TokenReview asks about a token.
func NewBearerAuthenticator(tokens ...authenticator.Token) authenticator.Request {
	return group.NewAuthenticatedGroupAdder(bearertoken.New(tokenunion.New(tokens...)))
}

// NewAuthenticator authenticates client certificates that chain to roots (a certificate that verified is
// remembered for a minute, see verifiedCerts), then bearer tokens with tokens (in order), and lets
// requests without credentials through as system:anonymous only for PublicPaths. A bearer token no token
// authenticator accepts is a 401, wherever it is sent.
func NewAuthenticator(roots *x509.CertPool, tokens ...authenticator.Token) authenticator.Request {
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = roots
	chain := []authenticator.Request{newVerifiedCerts(x509request.New(opts, x509request.CommonNameUserConversion))}
	if len(tokens) > 0 {
		chain = append(chain, bearertoken.New(tokenunion.New(tokens...)))
	}
	creds := group.NewAuthenticatedGroupAdder(requestunion.New(chain...))
	return &withPublicPaths{creds: creds}
}

type withPublicPaths struct {
	creds authenticator.Request
}

func (a *withPublicPaths) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	resp, ok, err := a.creds.AuthenticateRequest(req)
	if ok || err != nil {
		return resp, ok, err
	}
	if isPublic(req.URL.Path) {
		return &authenticator.Response{User: &user.DefaultInfo{
			Name:   user.Anonymous,
			Groups: []string{user.AllUnauthenticated},
		}}, true, nil
	}
	return nil, false, nil
}

func isPublic(p string) bool {
	for _, pub := range PublicPaths {
		if prefix, ok := strings.CutSuffix(pub, "*"); ok {
			if strings.HasPrefix(p, prefix) {
				return true
			}
		} else if p == pub {
			return true
		}
	}
	return false
}

// NewAuthorizer allows members of system:masters everything, everyone the public paths, and asks the
// extra authorizers (in order) about the rest; with none, the rest is denied.
func NewAuthorizer(extra ...union.NamedAuthorizer) (authorizer.Authorizer, error) {
	public, err := path.NewAuthorizer(PublicPaths)
	if err != nil {
		return nil, err
	}
	chain := []union.NamedAuthorizer{
		{AuthorizerName: "privileged-groups", Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)},
		{AuthorizerName: "public-paths", Authorizer: public},
	}
	return union.New(append(chain, extra...)...)
}
