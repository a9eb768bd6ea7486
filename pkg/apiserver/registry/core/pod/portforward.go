package pod

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// PortForwardREST is pods/portforward: it connects the client to ports of a pod through the kubelet of
// the pod's node (/portForward/{namespace}/{pod} there), which speaks portforward.k8s.io over SPDY. A SPDY
// client's upgrade is proxied to the kubelet as is; a WebSocket client tunneling SPDY
// (SPDY/3.1+portforward.k8s.io, kubectl's first choice) has its tunnel unwrapped here towards the kubelet.
type PortForwardREST struct{ portForwardStreams }

var _ rest.Connecter = &PortForwardREST{}

// Connect returns the handler that connects the client's streams to the pod's ports.
func (r *PortForwardREST) Connect(ctx context.Context, name string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, err := r.options(options)
	if err != nil {
		return nil, err
	}
	for _, p := range opts.Ports {
		if p <= 0 || p > 65535 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("port %d is not a valid port number", p))
		}
	}
	pod, err := getPod(ctx, r.pods, name)
	if err != nil {
		return nil, err
	}
	if err := checkScheduled(pod); err != nil {
		return nil, err
	}
	q := url.Values{}
	for _, p := range opts.Ports {
		q.Add("port", strconv.Itoa(int(p)))
	}
	loc, err := r.kubelet.podLocation(ctx, pod, "/portForward/"+pod.Namespace+"/"+pod.Name, q)
	if err != nil {
		return nil, err
	}
	tunnel := func(spdyProxy http.Handler) http.Handler { return translator.NewTunnelingHandler(spdyProxy) }
	return r.upgradeHandler(loc, responder, tunnel, wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
}
