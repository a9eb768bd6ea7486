package service

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	endpointproxy "k8s.io/apiserver/pkg/util/proxy"

	"github.com/rayctl/rayctl/pkg/apiserver/registry/proxyrest"
)

// ProxyREST is services/proxy: "[scheme:]name[:port]/proxy/path" is proxied to a ready endpoint of the
// service's port (by name or number; without one, the service's unnamed port), chosen at random from
// the service's EndpointSlices, over the pod network.
type ProxyREST struct {
	services  rest.Getter
	slices    rest.Lister
	transport http.RoundTripper
}

var _ rest.Connecter = &ProxyREST{}

// NewProxyREST returns services/proxy over the services in services and the EndpointSlices in slices,
// reaching endpoints with podDial.
func NewProxyREST(services rest.Getter, slices rest.Lister, podDial proxyrest.DialFunc) *ProxyREST {
	return &ProxyREST{services: services, slices: slices, transport: proxyrest.NewTransport(podDial)}
}

// New returns an empty ServiceProxyOptions.
func (r *ProxyREST) New() runtime.Object { return &corev1.ServiceProxyOptions{} }

// Destroy does nothing: the service store owns the storage.
func (r *ProxyREST) Destroy() {}

// NewConnectOptions returns the options the request decodes into; the subpath is the path proxied.
func (r *ProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.ServiceProxyOptions{}, true, "path"
}

// ConnectMethods are the methods proxied.
func (r *ProxyREST) ConnectMethods() []string { return proxyrest.Methods }

// Connect returns the handler that proxies the request to an endpoint of the service.
func (r *ProxyREST) Connect(ctx context.Context, id string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.ServiceProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	scheme, name, port, err := proxyrest.SplitID("service", id)
	if err != nil {
		return nil, err
	}
	obj, err := r.services.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	svc := obj.(*corev1.Service)
	portName, err := servicePortName(svc, port)
	if err != nil {
		return nil, err
	}
	slices, err := r.endpointSlices(ctx, svc.Name)
	if err != nil {
		return nil, err
	}
	family := corev1.IPFamilyUnknown
	if len(svc.Spec.IPFamilies) > 0 {
		family = svc.Spec.IPFamilies[0]
	}
	hostPort, err := endpointproxy.RandomEndpoint(svc.Name, slices, portName, family, func(ep *discoveryv1.Endpoint) bool {
		return proxyrest.CheckIP(ep.Addresses[0]) == nil
	})
	if err != nil {
		return nil, err
	}
	return proxyrest.Handler(&url.URL{Scheme: scheme, Host: hostPort}, opts.Path, r.transport, responder), nil
}

// servicePortName is the name of the service port a proxy request means: port is a port's number or
// name, or empty for the unnamed port.
func servicePortName(svc *corev1.Service, port string) (string, error) {
	n, numErr := strconv.Atoi(port)
	for _, p := range svc.Spec.Ports {
		if (numErr == nil && int(p.Port) == n) || (numErr != nil && p.Name == port) {
			return p.Name, nil
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %q found for service %q", port, svc.Name))
}

// endpointSlices lists the EndpointSlices of the service called name in ctx's namespace.
func (r *ProxyREST) endpointSlices(ctx context.Context, name string) ([]*discoveryv1.EndpointSlice, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	obj, err := r.slices.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*discoveryv1.EndpointSliceList)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("endpoint slices listed as %T", obj))
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}
