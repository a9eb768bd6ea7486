package pod

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"
)

// LogREST is pods/log: it streams a container's log from the kubelet of the pod's node
// (GET /containerLogs/{namespace}/{pod}/{container} there), as `kubectl logs` reads it.
type LogREST struct {
	pods    rest.Getter
	kubelet *kubeletClient
}

var (
	_ rest.GetterWithOptions = &LogREST{}
	_ rest.StorageMetadata   = &LogREST{}
)

// New returns an empty Pod: the object pods/log is a subresource of.
func (r *LogREST) New() runtime.Object { return &corev1.Pod{} }

// Destroy does nothing: the pod store owns the storage.
func (r *LogREST) Destroy() {}

// NewGetOptions returns the options the query parameters decode into; pods/log takes no subpath.
func (r *LogREST) NewGetOptions() (runtime.Object, bool, string) {
	return &corev1.PodLogOptions{}, false, ""
}

// ProducesMIMETypes says pods/log answers in plain text.
func (r *LogREST) ProducesMIMETypes(verb string) []string { return []string{"text/plain"} }

// ProducesObject says pods/log answers with a string, not a Pod.
func (r *LogREST) ProducesObject(verb string) any { return "" }

// Get returns a stream of the log of the container the options select. A pod not yet on a node has no
// log: its stream is empty.
func (r *LogREST) Get(ctx context.Context, name string, options runtime.Object) (runtime.Object, error) {
	opts, ok := options.(*corev1.PodLogOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	if errs := validateLogOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("PodLogOptions").GroupKind(), name, errs)
	}
	pod, err := getPod(ctx, r.pods, name)
	if err != nil {
		return nil, err
	}
	container, err := containerName(pod, opts.Container)
	if err != nil {
		return nil, err
	}
	if pod.Spec.NodeName == "" {
		return &genericrest.LocationStreamer{}, nil
	}
	if !opts.Previous {
		if err := checkHasLog(pod, container); err != nil {
			return nil, err
		}
	}
	loc, err := r.kubelet.location(ctx, pod, "/containerLogs", container, logQuery(opts))
	if err != nil {
		return nil, err
	}
	return &genericrest.LocationStreamer{
		Location:        loc,
		Transport:       r.kubelet.transport,
		ContentType:     "text/plain",
		Flush:           opts.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name),
		RedirectChecker: genericrest.PreventRedirects,
	}, nil
}

// validateLogOptions checks the options as Kubernetes does: no negative tail, a positive byte limit
// and since-seconds, at most one of sinceSeconds and sinceTime. Only the combined stream is served.
func validateLogOptions(opts *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if opts.TailLines != nil && *opts.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *opts.TailLines, "must be greater than or equal to 0"))
	}
	if opts.LimitBytes != nil && *opts.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *opts.LimitBytes, "must be greater than 0"))
	}
	switch {
	case opts.SinceSeconds != nil && opts.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case opts.SinceSeconds != nil && *opts.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *opts.SinceSeconds, "must be greater than 0"))
	}
	if opts.Stream != nil && *opts.Stream != corev1.LogStreamAll {
		errs = append(errs, field.NotSupported(field.NewPath("stream"), *opts.Stream, []string{corev1.LogStreamAll}))
	}
	return errs
}

// checkHasLog refuses, as the kubelet would, the log of a container that has not started yet: one the
// kubelet reports nothing for, or waiting with no earlier run to show.
func checkHasLog(pod *corev1.Pod, container string) error {
	status, ok := containerStatus(pod, container)
	switch {
	case !ok:
		return apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", container, pod.Name))
	case status.State.Waiting != nil && status.LastTerminationState.Terminated == nil:
		reason := status.State.Waiting.Reason
		switch reason {
		case "ErrImagePull":
			reason = "image can't be pulled"
		case "ImagePullBackOff":
			reason = "trying and failing to pull image"
		case "":
			reason = "ContainerCreating"
		}
		return apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: %s", container, pod.Name, reason))
	}
	return nil
}

// logQuery is the kubelet's query for opts.
func logQuery(opts *corev1.PodLogOptions) url.Values {
	q := url.Values{}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Previous {
		q.Set("previous", "true")
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	if opts.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*opts.SinceSeconds, 10))
	}
	if opts.SinceTime != nil {
		q.Set("sinceTime", opts.SinceTime.UTC().Format(time.RFC3339))
	}
	if opts.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*opts.TailLines, 10))
	}
	if opts.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*opts.LimitBytes, 10))
	}
	return q
}
