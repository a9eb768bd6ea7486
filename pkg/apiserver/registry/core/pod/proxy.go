package pod

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/rayctl/rayctl/pkg/apiserver/registry/proxyrest"
)

// ProxyREST is pods/proxy: "[scheme:]name[:port]/proxy/path" is proxied to the pod's IP on port (a
// number or a container port's name; without one, the first port a container declares) over the pod
// network.
type ProxyREST struct {
	pods      rest.Getter
	transport http.RoundTripper
}

var _ rest.Connecter = &ProxyREST{}

// New returns an empty PodProxyOptions.
func (r *ProxyREST) New() runtime.Object { return &corev1.PodProxyOptions{} }

// Destroy does nothing: the pod store owns the storage.
func (r *ProxyREST) Destroy() {}

// NewConnectOptions returns the options the request decodes into; the subpath is the path proxied.
func (r *ProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodProxyOptions{}, true, "path"
}

// ConnectMethods are the methods proxied.
func (r *ProxyREST) ConnectMethods() []string { return proxyrest.Methods }

// Connect returns the handler that proxies the request to the pod.
func (r *ProxyREST) Connect(ctx context.Context, id string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.PodProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	scheme, name, port, err := proxyrest.SplitID("pod", id)
	if err != nil {
		return nil, err
	}
	pod, err := getPod(ctx, r.pods, name)
	if err != nil {
		return nil, err
	}
	port, err = podPort(pod, port)
	if err != nil {
		return nil, err
	}
	if pod.Status.PodIP == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s has no IP yet", name))
	}
	if err := proxyrest.CheckIP(pod.Status.PodIP); err != nil {
		return nil, err
	}
	loc := &url.URL{Scheme: scheme, Host: pod.Status.PodIP}
	if port != "" {
		loc.Host = net.JoinHostPort(pod.Status.PodIP, port)
	}
	return proxyrest.Handler(loc, opts.Path, r.transport, responder), nil
}

// podPort resolves port of a pods/proxy request to a number: as given when numeric, else the container
// port of that name; an empty port means the first port a container declares (none: the scheme's).
func podPort(pod *corev1.Pod, port string) (string, error) {
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				return strconv.Itoa(int(c.Ports[0].ContainerPort)), nil
			}
		}
		return "", nil
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n <= 0 || n > 65535 {
			return "", apierrors.NewBadRequest(fmt.Sprintf("port %s is not a valid port number", port))
		}
		return port, nil
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				return strconv.Itoa(int(p.ContainerPort)), nil
			}
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("pod %s has no container port named %q", pod.Name, port))
}
