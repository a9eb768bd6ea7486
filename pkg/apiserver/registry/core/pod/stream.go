package pod

import (
	"fmt"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
)

// streamREST is what pods/exec and pods/portforward share: they read the pod from the pod store, keep
// no storage of their own, decode their query into options of type T (*T is a runtime.Object), take no
// subpath, and connect the client's streams to the kubelet of the pod's node, taking the upgrade by GET
// (WebSocket) or POST (SPDY).
type streamREST[T any, PT interface {
	*T
	runtime.Object
}] struct {
	pods    rest.Getter
	kubelet *kubeletClient
}

// execStreams and portForwardStreams are the streamREST of pods/exec and of pods/portforward.
type (
	execStreams        = streamREST[corev1.PodExecOptions, *corev1.PodExecOptions]
	portForwardStreams = streamREST[corev1.PodPortForwardOptions, *corev1.PodPortForwardOptions]
)

// New returns empty options of the subresource.
func (r *streamREST[T, PT]) New() runtime.Object { return PT(new(T)) }

// Destroy does nothing: the pod store owns the storage.
func (r *streamREST[T, PT]) Destroy() {}

// NewConnectOptions returns the options the query parameters decode into, and that there is no subpath.
func (r *streamREST[T, PT]) NewConnectOptions() (runtime.Object, bool, string) {
	return PT(new(T)), false, ""
}

// ConnectMethods are the methods a stream upgrade comes with: GET for WebSocket, POST for SPDY.
func (r *streamREST[T, PT]) ConnectMethods() []string {
	return []string{http.MethodGet, http.MethodPost}
}

// options is options as the subresource's own options type, or a BadRequest.
func (r *streamREST[T, PT]) options(options runtime.Object) (PT, error) {
	opts, ok := options.(PT)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	return opts, nil
}

// checkScheduled refuses a pod that no node runs yet: there is no kubelet to connect to.
func checkScheduled(pod *corev1.Pod) error {
	if pod.Spec.NodeName == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	return nil
}

// upgradeHandler serves a stream upgrade towards the kubelet at loc: a SPDY client's upgrade is proxied
// as it is; a WebSocket client's request (as isWebSocket tells) goes to the handler websocket makes
// from that SPDY proxy.
func (r *streamREST[T, PT]) upgradeHandler(loc *url.URL, responder rest.Responder, websocket func(spdyProxy http.Handler) http.Handler,
	isWebSocket func(*http.Request) bool) http.Handler {
	spdyProxy := r.kubelet.upgradeProxy(loc, responder)
	return translator.NewTranslatingHandler(spdyProxy, websocket(spdyProxy), isWebSocket)
}
