package pod

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// ExecREST is pods/exec: it runs a command in a container through the kubelet of the pod's node
// (/exec/{namespace}/{pod}/{container} there), which speaks the remote command protocol over SPDY.
// A SPDY client's upgrade is proxied to the kubelet as is; a WebSocket client speaking
// v5.channel.k8s.io (kubectl's first choice) is served here and translated to SPDY towards the kubelet.
type ExecREST struct{ execStreams }

var _ rest.Connecter = &ExecREST{}

// Connect returns the handler that connects the client's streams to the command in the container.
func (r *ExecREST) Connect(ctx context.Context, name string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, err := r.options(options)
	if err != nil {
		return nil, err
	}
	pod, err := getPod(ctx, r.pods, name)
	if err != nil {
		return nil, err
	}
	container, err := containerName(pod, opts.Container)
	if err != nil {
		return nil, err
	}
	if err := checkScheduled(pod); err != nil {
		return nil, err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot exec into a container in a completed pod; current phase is %s", pod.Status.Phase))
	}
	loc, err := r.kubelet.location(ctx, pod, "/exec", container, execQuery(opts))
	if err != nil {
		return nil, err
	}
	websocket := func(http.Handler) http.Handler {
		return translator.NewStreamTranslatorHandler(loc, r.kubelet.transport, 0, translator.Options{
			Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY,
		})
	}
	return r.upgradeHandler(loc, responder, websocket, wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
}

// execQuery is the kubelet's query for opts.
func execQuery(opts *corev1.PodExecOptions) url.Values {
	q := url.Values{}
	for k, on := range map[string]bool{"stdin": opts.Stdin, "stdout": opts.Stdout, "stderr": opts.Stderr, "tty": opts.TTY} {
		if on {
			q.Set(k, "true")
		}
	}
	for _, arg := range opts.Command {
		q.Add("command", arg)
	}
	return q
}
