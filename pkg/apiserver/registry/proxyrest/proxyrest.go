// Package proxyrest is what pods/proxy and services/proxy share: the methods they answer, the transport
// that reaches pods over the pod network, the handler that proxies one request (upgrades included) to
// a backend, and the checks on a backend's address and port.
package proxyrest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Methods are the methods a proxy subresource passes on.
var Methods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

// DialFunc connects to an address on the pod network.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialTimeout bounds a connect to a pod.
const dialTimeout = 30 * time.Second

// NewTransport returns the transport to pods. It reaches pod IPs through dial (rayctl's dials from
// inside the node network namespace, since the host's has no route to pods; nil dials from this
// process's own network) and never through a proxy from the environment. Like kube-apiserver's proxy
// transport it does not verify an https backend's certificate: pods' certificates are not the cluster's.
func NewTransport(dial DialFunc) *http.Transport {
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, dialTimeout)
			defer cancel()
			return dial(ctx, network, addr)
		},
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // as kube-apiserver
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 10,
		IdleConnTimeout:     90 * time.Second,
	}
}

// Handler proxies a request to path under location, with the request's query. Failing to reach the
// backend answers 503 ("error trying to reach service"); links and redirects in the backend's answers
// are rewritten to stay under the proxy path.
func Handler(location *url.URL, path string, transport http.RoundTripper, responder rest.Responder) http.Handler {
	loc := *location
	if loc.Scheme == "" {
		loc.Scheme = "http"
	}
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, path)
	// Keep a request for the proxy root ("…/proxy") at the backend's root.
	if loc.Path == "" {
		loc.Path = "/"
	}
	return proxy.NewUpgradeAwareHandler(&loc, transport, true, false, proxy.NewErrorResponder(responder))
}

// SplitID splits a proxy request's name, "[scheme:]name[:port]", refusing other forms and schemes other
// than http and https with a 400 that names kind.
func SplitID(kind, id string) (scheme, name, port string, err error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return "", "", "", apierrors.NewBadRequest(fmt.Sprintf("invalid %s request %q", kind, id))
	}
	return scheme, name, port, nil
}

// CheckIP refuses a backend address a proxy must not reach: anything but a unicast address. Loopback
// is allowed, unlike on kube-apiserver, because pods sharing the host's network report it.
func CheckIP(ip string) error {
	addr := net.ParseIP(ip)
	if addr == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid backend address %q", ip))
	}
	if !addr.IsGlobalUnicast() && !addr.IsLoopback() {
		return apierrors.NewBadRequest(fmt.Sprintf("address %s is not allowed", ip))
	}
	return nil
}
