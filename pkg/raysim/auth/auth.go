// Package auth is Ray's token authentication as raysim honours it. With RAY_AUTH_MODE=token in a
// node's environment its HTTP servers refuse callers without the cluster's token, and raysim's
// clients send the token; with the mode unset or "disabled" nothing is checked or sent.
//
// The token is read from RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH names, else (with
// RAY_ENABLE_K8S_TOKEN_AUTH, see K8sMode) the pod's service account token, else ~/.ray/auth_token. A server takes it from an Authorization or X-Ray-Authorization header
// ("Bearer <token>"), else from the ray-authentication-token cookie (the bare token).
package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Names of the environment variables, headers and cookie of Ray's token authentication.
const (
	// ModeEnv selects the authentication mode: "token" turns it on.
	ModeEnv = "RAY_AUTH_MODE"
	// TokenEnv holds the token itself.
	TokenEnv = "RAY_AUTH_TOKEN"
	// TokenPathEnv names a file holding the token.
	TokenPathEnv = "RAY_AUTH_TOKEN_PATH"
	// RayHeader carries the token where a proxy strips Authorization.
	RayHeader = "X-Ray-Authorization"
	// CookieName is the cookie the dashboard's browser sessions carry the token in.
	CookieName = "ray-authentication-token"

	bearer = "Bearer "
)

// ErrNoToken is wrapped by the error Token returns when token mode is on but no token is found.
var ErrNoToken = errors.New("token authentication is enabled (RAY_AUTH_MODE=token) but no authentication token was found")

// TokenMode reports whether the environment getenv reads asks for token authentication.
func TokenMode(getenv func(string) string) bool {
	return strings.EqualFold(strings.TrimSpace(getenv(ModeEnv)), "token")
}

// Token is the token a process with the environment getenv reads serves or sends: "" when token
// mode is off; otherwise RAY_AUTH_TOKEN, else the contents of the file RAY_AUTH_TOKEN_PATH names,
// else (K8sMode) of RaySATokenPath or K8sSATokenPath, else of $HOME/.ray/auth_token, with surrounding
// whitespace removed. With token mode on and no token in any of them the error wraps ErrNoToken.
func Token(getenv func(string) string) (string, error) {
	t, _, err := lookup(getenv)
	return t, err
}

// Source is Token for a long-running sender: a token read from a service account token file (K8sMode,
// where the kubelet rewrites the file before the token expires) is read again when the file changes
// (see FileToken); any other token is Token's, unchanged.
func Source(getenv func(string) string) (func() string, error) {
	t, saFile, err := lookup(getenv)
	if err != nil || saFile == "" {
		return func() string { return t }, err
	}
	return NewFileToken(saFile, t).Token, nil
}

// lookup is Token, and the service account token file the token was read from ("" when it was not).
func lookup(getenv func(string) string) (token, saFile string, err error) {
	if !TokenMode(getenv) {
		return "", "", nil
	}
	if t := strings.TrimSpace(getenv(TokenEnv)); t != "" {
		return t, "", nil
	}
	if p := getenv(TokenPathEnv); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", "", fmt.Errorf("%w: reading %s=%s: %v", ErrNoToken, TokenPathEnv, p, err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, "", nil
		}
		return "", "", fmt.Errorf("%w: %s=%s is empty", ErrNoToken, TokenPathEnv, p)
	}
	if K8sMode(getenv) {
		for _, p := range []string{RaySATokenPath, K8sSATokenPath} {
			if b, err := os.ReadFile(p); err == nil {
				if t := strings.TrimSpace(string(b)); t != "" {
					return t, p, nil
				}
			}
		}
	}
	if home := getenv("HOME"); home != "" {
		if b, err := os.ReadFile(filepath.Join(home, ".ray", "auth_token")); err == nil {
			if t := strings.TrimSpace(string(b)); t != "" {
				return t, "", nil
			}
		}
	}
	return "", "", fmt.Errorf("%w: set %s, or %s to a file holding it, or write it to ~/.ray/auth_token", ErrNoToken, TokenEnv, TokenPathEnv)
}

// SetHeader puts "Authorization: Bearer <token>" on h; an empty token leaves h alone.
func SetHeader(h http.Header, token string) {
	if token != "" {
		h.Set("Authorization", bearer+token)
	}
}

// Paths is a set of request paths served without a token.
type Paths struct {
	// Exact are paths matched as they are.
	Exact []string
	// Prefixes are path prefixes ("/static/") whose paths are all open.
	Prefixes []string
}

// DashboardOpen are the dashboard's paths Ray serves without a token: the landing page, the
// authentication endpoints, the health checks and the static files.
var DashboardOpen = Paths{
	Exact: []string{"/", "/favicon.ico", "/api/authentication_mode", "/api/authenticate",
		"/api/healthz", "/api/gcs_healthz", "/api/local_raylet_healthz", "/-/healthz"},
	Prefixes: []string{"/static/"},
}

// AgentOpen are the agent's paths Ray serves without a token: its health checks.
var AgentOpen = Paths{Exact: []string{"/api/healthz", "/api/local_raylet_healthz"}}

// Has reports whether p is open. A path that is not clean ("/static/../api/jobs/") never is.
func (ps Paths) Has(p string) bool {
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean != p {
		return false
	}
	for _, e := range ps.Exact {
		if p == e {
			return true
		}
	}
	for _, pre := range ps.Prefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// Check reports whether a request's token (without "Bearer ") is the cluster's, or belongs to a caller
// allowed in.
type Check func(ctx context.Context, token string) bool

// Equal is the Check of Ray's token mode: the token is the cluster's, compared in constant time. An
// empty token (token mode off) gives nil: nothing is checked.
func Equal(token string) Check {
	if token == "" {
		return nil
	}
	want := []byte(token)
	return func(_ context.Context, got string) bool { return subtle.ConstantTimeCompare([]byte(got), want) == 1 }
}

// Require returns middleware that serves a request only when check accepts its token, or its path is
// open. A request with no token is answered 401, one check refuses or a header without the "Bearer "
// prefix 403. A nil check (authentication off) returns next unchanged.
func Require(check Check, open Paths) func(next http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if check == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if open.Has(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			value, ok := presented(r)
			if !ok {
				refuse(w, http.StatusUnauthorized, "Unauthorized: Missing authentication token")
				return
			}
			got, ok := strings.CutPrefix(value, bearer)
			if got = strings.TrimSpace(got); !ok || got == "" || !check(r.Context(), got) {
				refuse(w, http.StatusForbidden, "Forbidden: Invalid authentication token")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// presented is the credential a request carries, as an Authorization value: the Authorization
// header, else X-Ray-Authorization, else the cookie's token with "Bearer " before it.
func presented(r *http.Request) (string, bool) {
	for _, h := range []string{"Authorization", RayHeader} {
		if v := r.Header.Get(h); v != "" {
			return v, true
		}
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		return bearer + c.Value, true
	}
	return "", false
}

func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}
