package pod

import (
	"context"
	"crypto/tls"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/utils/ptr"
)

// getter serves objects by name, as a store does.
type getter map[string]runtime.Object

func (g getter) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if o, ok := g[name]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("things"), name)
}

func TestQueryConversions(t *testing.T) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := addQueryConversions(s); err != nil {
		t.Fatal(err)
	}
	codec := runtime.NewParameterCodec(s)

	q, _ := url.ParseQuery("container=c&follow&previous=false&sinceSeconds=10&timestamps=true&tailLines=5&limitBytes=7&stream=All")
	var logOpts corev1.PodLogOptions
	if err := codec.DecodeParameters(q, corev1.SchemeGroupVersion, &logOpts); err != nil {
		t.Fatal(err)
	}
	want := corev1.PodLogOptions{Container: "c", Follow: true, SinceSeconds: ptr.To[int64](10), Timestamps: true,
		TailLines: ptr.To[int64](5), LimitBytes: ptr.To[int64](7), Stream: ptr.To("All")}
	if logOpts.String() != want.String() {
		t.Errorf("log options: got %v, want %v", &logOpts, &want)
	}
	q, _ = url.ParseQuery("tailLines=x")
	if err := codec.DecodeParameters(q, corev1.SchemeGroupVersion, &corev1.PodLogOptions{}); err == nil || !strings.Contains(err.Error(), "tailLines") {
		t.Errorf("tailLines=x: got %v, want an error naming it", err)
	}

	q, _ = url.ParseQuery("command=sh&command=-c&command=echo+a&stdin=true&stdout=1&stderr=0&container=main")
	var execOpts corev1.PodExecOptions
	if err := codec.DecodeParameters(q, corev1.SchemeGroupVersion, &execOpts); err != nil {
		t.Fatal(err)
	}
	wantExec := corev1.PodExecOptions{Command: []string{"sh", "-c", "echo a"}, Stdin: true, Stdout: true, Container: "main"}
	if execOpts.String() != wantExec.String() {
		t.Errorf("exec options: got %v, want %v", &execOpts, &wantExec)
	}
}

func TestValidateLogOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts corev1.PodLogOptions
		want string
	}{
		{"empty", corev1.PodLogOptions{}, ""},
		{"negative tail", corev1.PodLogOptions{TailLines: ptr.To[int64](-1)}, "tailLines"},
		{"zero limit", corev1.PodLogOptions{LimitBytes: ptr.To[int64](0)}, "limitBytes"},
		{"zero since", corev1.PodLogOptions{SinceSeconds: ptr.To[int64](0)}, "sinceSeconds"},
		{"both since", corev1.PodLogOptions{SinceSeconds: ptr.To[int64](1), SinceTime: &metav1.Time{}}, "at most one"},
		{"stdout only", corev1.PodLogOptions{Stream: ptr.To("Stdout")}, "stream"},
	} {
		errs := validateLogOptions(&tc.opts)
		if got := errs.ToAggregate(); (got == nil) != (tc.want == "") || got != nil && !strings.Contains(got.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, got, tc.want)
		}
	}
}

func TestContainerName(t *testing.T) {
	pod := func(names ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		for _, n := range names {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n})
		}
		return p
	}
	if got, err := containerName(pod("only"), ""); err != nil || got != "only" {
		t.Errorf("the only container: got %q, %v", got, err)
	}
	if got, err := containerName(pod("a", "b"), "b"); err != nil || got != "b" {
		t.Errorf("a named container: got %q, %v", got, err)
	}
	_, err := containerName(pod("a", "b"), "")
	if !apierrors.IsBadRequest(err) || err.Error() != "a container name must be specified for pod p, choose one of: [a b]" {
		t.Errorf("two containers, none named: got %v", err)
	}
	withInit := pod("a", "b")
	withInit.Spec.InitContainers = []corev1.Container{{Name: "setup"}}
	if _, err := containerName(withInit, ""); err == nil || !strings.HasSuffix(err.Error(), " or one of the init containers: [setup]") {
		t.Errorf("with an init container: got %v", err)
	}
	if got, err := containerName(withInit, "setup"); err != nil || got != "setup" {
		t.Errorf("an init container: got %q, %v", got, err)
	}
	if _, err := containerName(pod("a"), "wrong"); !apierrors.IsBadRequest(err) || err.Error() != "container wrong is not valid for pod p" {
		t.Errorf("a wrong container: got %v", err)
	}
}

// logFixture is a LogREST over one pod "p" in namespace "ns" on node "n", whose kubelet is at
// 127.0.0.1:10250.
func logFixture(pod *corev1.Pod) (*LogREST, context.Context) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "host"}, {Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	kubelet := newKubeletClient(Kubelets{Nodes: getter{"n": node}, TLS: &tls.Config{}})
	return &LogREST{pods: getter{pod.Name: pod}, kubelet: kubelet}, genericapirequest.WithNamespace(context.Background(), "ns")
}

func runningPod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	p.Spec.NodeName = "n"
	p.Spec.Containers = []corev1.Container{{Name: "main"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return p
}

func TestLogLocation(t *testing.T) {
	r, ctx := logFixture(runningPod())
	obj, err := r.Get(ctx, "p", &corev1.PodLogOptions{Follow: true, TailLines: ptr.To[int64](3), Timestamps: true})
	if err != nil {
		t.Fatal(err)
	}
	s := obj.(*genericrest.LocationStreamer)
	if want := "https://127.0.0.1:10250/containerLogs/ns/p/main?follow=true&tailLines=3&timestamps=true"; s.Location.String() != want {
		t.Errorf("location: got %s, want %s", s.Location, want)
	}
	if !s.Flush || s.ContentType != "text/plain" || s.Transport == nil {
		t.Errorf("streamer: flush %v, content type %q, transport %v", s.Flush, s.ContentType, s.Transport)
	}
	if _, err := r.Get(ctx, "missing", &corev1.PodLogOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a missing pod: got %v, want not found", err)
	}
}

func TestLogWaiting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status []corev1.ContainerStatus
		want   string
	}{
		{"no status yet", nil, `container "main" in pod "p" is waiting to start: ContainerCreating`},
		{"pulling", []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}},
			`container "main" in pod "p" is waiting to start: image can't be pulled`},
		{"crash loop", []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}, ""},
	} {
		p := runningPod()
		p.Status.ContainerStatuses = tc.status
		r, ctx := logFixture(p)
		_, err := r.Get(ctx, "p", &corev1.PodLogOptions{})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !apierrors.IsBadRequest(err) || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
		// The previous run's log is the kubelet's to find.
		if _, err := r.Get(ctx, "p", &corev1.PodLogOptions{Previous: true}); err != nil {
			t.Errorf("%s, previous: %v", tc.name, err)
		}
	}

	// A pod on no node has no log yet: an empty stream.
	p := runningPod()
	p.Spec.NodeName = ""
	r, ctx := logFixture(p)
	obj, err := r.Get(ctx, "p", &corev1.PodLogOptions{})
	if err != nil || obj.(*genericrest.LocationStreamer).Location != nil {
		t.Errorf("an unscheduled pod: got %v, %v; want an empty stream", obj, err)
	}
}

func TestExecConnect(t *testing.T) {
	r, ctx := logFixture(runningPod())
	exec := &ExecREST{execStreams{pods: r.pods, kubelet: r.kubelet}}
	if _, err := exec.Connect(ctx, "p", &corev1.PodExecOptions{Command: []string{"true"}, Stdout: true}, nil); err != nil {
		t.Fatal(err)
	}
	if got := execQuery(&corev1.PodExecOptions{Command: []string{"sh", "-c", "echo a"}, Stdin: true, Stdout: true}).Encode(); got != "command=sh&command=-c&command=echo+a&stdin=true&stdout=true" {
		t.Errorf("exec query: got %s", got)
	}
	done := runningPod()
	done.Status.Phase = corev1.PodSucceeded
	r, ctx = logFixture(done)
	exec = &ExecREST{execStreams{pods: r.pods, kubelet: r.kubelet}}
	if _, err := exec.Connect(ctx, "p", &corev1.PodExecOptions{Command: []string{"true"}}, nil); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "completed pod") {
		t.Errorf("a completed pod: got %v", err)
	}
	// Without a kubelet client the subresources are unavailable.
	exec.kubelet = nil
	done.Status.Phase = corev1.PodRunning
	if _, err := exec.Connect(ctx, "p", &corev1.PodExecOptions{Command: []string{"true"}}, nil); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("no kubelet client: got %v", err)
	}
}
