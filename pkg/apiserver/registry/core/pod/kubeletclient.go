package pod

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Kubelets tells pods/log, pods/exec and pods/portforward how to reach the kubelet of a pod's node.
type Kubelets struct {
	// Nodes reads Node objects. A node's kubelet listens at its InternalIP (else ExternalIP, else
	// Hostname) on status.daemonEndpoints.kubeletEndpoint.Port.
	Nodes rest.Getter
	// TLS is the client side of the connection: the API server's kubelet-client certificate and the CA
	// that signed the kubelets' serving certificates. With no TLS (or no Nodes) pods/log, pods/exec and
	// pods/portforward answer 503.
	TLS *tls.Config
}

// kubeletClient resolves kubelet URLs and carries the one transport every kubelet call shares.
type kubeletClient struct {
	nodes rest.Getter
	// transport is an *http.Transport so that the upgrade paths (the SPDY dialer, the stream translator)
	// can read its TLS configuration and dialer.
	transport *http.Transport
}

// newKubeletClient returns the client for k, or nil when k cannot reach any kubelet.
func newKubeletClient(k Kubelets) *kubeletClient {
	if k.Nodes == nil || k.TLS == nil {
		return nil
	}
	cfg := k.TLS.Clone()
	// Exec upgrades the connection, which HTTP/2 cannot do: speak HTTP/1.1 only.
	cfg.NextProtos = []string{"http/1.1"}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return &kubeletClient{
		nodes: k.Nodes,
		transport: &http.Transport{
			TLSClientConfig:     cfg,
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 25,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// location is the URL of path ("/containerLogs", "/exec") for container of pod on the pod's node,
// with query.
func (c *kubeletClient) location(ctx context.Context, pod *corev1.Pod, path, container string, query url.Values) (*url.URL, error) {
	return c.podLocation(ctx, pod, path+"/"+pod.Namespace+"/"+pod.Name+"/"+container, query)
}

// podLocation is the URL of path on the kubelet of pod's node, with query.
func (c *kubeletClient) podLocation(ctx context.Context, pod *corev1.Pod, path string, query url.Values) (*url.URL, error) {
	if c == nil {
		return nil, apierrors.NewServiceUnavailable("the API server has no kubelet client configured")
	}
	host, err := c.kubeletHost(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: "https", Host: host, Path: path, RawQuery: query.Encode()}, nil
}

// kubeletHost returns host:port of the kubelet API of the node called name.
func (c *kubeletClient) kubeletHost(ctx context.Context, name string) (string, error) {
	obj, err := c.nodes.Get(genericapirequest.WithNamespace(ctx, ""), name, &metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q of the pod is not registered", name))
		}
		return "", err
	}
	node := obj.(*corev1.Node)
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports no kubelet endpoint", name))
	}
	addr := nodeAddress(node)
	if addr == "" {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports no address", name))
	}
	return net.JoinHostPort(addr, strconv.Itoa(int(port))), nil
}

// nodeAddress picks the address the API server reaches a node's kubelet at.
func nodeAddress(node *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// getPod reads the pod called name in ctx's namespace.
func getPod(ctx context.Context, pods rest.Getter, name string) (*corev1.Pod, error) {
	obj, err := pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod), nil
}

// containerName returns the container a request means: the one it names, which must exist, or the pod's
// only container.
func containerName(pod *corev1.Pod, name string) (string, error) {
	if name != "" {
		if !hasContainer(pod, name) {
			return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
		}
		return name, nil
	}
	switch len(pod.Spec.Containers) {
	case 1:
		return pod.Spec.Containers[0].Name, nil
	case 0:
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
	}
	names := func(cs []corev1.Container) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, names(pod.Spec.Containers))
	if len(pod.Spec.InitContainers) > 0 {
		msg += fmt.Sprintf(" or one of the init containers: %v", names(pod.Spec.InitContainers))
	}
	return "", apierrors.NewBadRequest(msg)
}

// hasContainer reports whether pod has a container, init container or ephemeral container called name.
func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// containerStatus returns the status the kubelet reported for the container called name, if any.
func containerStatus(pod *corev1.Pod, name string) (corev1.ContainerStatus, bool) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, s := range list {
			if s.Name == name {
				return s, true
			}
		}
	}
	return corev1.ContainerStatus{}, false
}

// upgradeProxy passes a stream upgrade (SPDY) through to the kubelet at loc as it is, refusing redirects;
// pods/exec and pods/portforward use it.
func (c *kubeletClient) upgradeProxy(loc *url.URL, responder rest.Responder) *proxy.UpgradeAwareHandler {
	h := proxy.NewUpgradeAwareHandler(loc, c.transport, false, true, proxy.NewErrorResponder(responder))
	h.RejectForwardingRedirects = true
	return h
}
