package e2e

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// rayResources are the ray.io/v1 resources rayctl serves.
var rayResources = []string{"rayclusters", "rayjobs", "rayservices", "raycronjobs"}

// TestRayWatchesServedOnceReady: once `rayctl up` says ready, a watch on every ray.io resource is
// accepted at once, on a new data dir and after a restart. (The API server fills a custom resource's
// watch cache on the first request for it and refuses watches with 429 and Retry-After: 1 until then;
// a controller's informer started at ready then waited a second before it saw anything.) The instance
// runs no controllers and no kubelet, so the test's watches are the first requests for the Ray
// resources.
func TestRayWatchesServedOnceReady(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	in, err := framework.Start("", framework.ControlPlaneOnly()...)
	if err != nil {
		t.Fatalf("rayctl up: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	for _, start := range []string{"new data dir", "restart"} {
		if start == "restart" {
			must(t, "stop", in.Stop())
			must(t, "restart", in.Restart())
		}
		for _, r := range rayResources {
			// Without client-go's retry of a 429 after the second its Retry-After asks for.
			body, err := in.Client.CoreV1().RESTClient().Get().AbsPath("/apis/ray.io/v1", r).
				Param("watch", "true").Param("resourceVersion", "0").MaxRetries(0).Stream(ctx)
			if err != nil {
				t.Errorf("%s: the first watch of %s once ready: %v, want it accepted", start, r, err)
				continue
			}
			body.Close()
		}
	}
}

// TestControllersWatchRayOnceReady: with the Ray controllers running, a RayCluster created as soon as
// `rayctl up` says ready gets its head Pod, and no watch of a ray.io resource was refused (429) after
// ready: the controllers' informers did not start by waiting for the API server's caches.
func TestControllersWatchRayOnceReady(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	in, err := framework.Start("", "--kubelet=false")
	if err != nil {
		t.Fatalf("rayctl up: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	atReady := rayWatchesRefused(t, ctx, in.Client)
	client, err := dynamic.NewForConfig(in.Config)
	must(t, "dynamic client", err)
	_, err = client.Resource(framework.RayClusters).Namespace("default").Create(ctx, framework.RayCluster("at-ready"), metav1.CreateOptions{})
	must(t, "create RayCluster", err)
	framework.WaitFor(t, ctx, "the RayCluster's head Pod", func() (bool, error) {
		pods, err := in.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=at-ready,ray.io/node-type=head"})
		return err == nil && len(pods.Items) == 1, err
	})
	if n := rayWatchesRefused(t, ctx, in.Client); n != atReady {
		t.Errorf("the API server refused %d watches of ray.io resources after ready (%d before), want none", n-atReady, atReady)
	}
}

// rayWatchesRefused reads from the API server's metrics how many watches of ray.io resources it has
// answered with 429 so far.
func rayWatchesRefused(t *testing.T, ctx context.Context, c kubernetes.Interface) int {
	t.Helper()
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	must(t, "GET /metrics", err)
	n := 0
	for sc := bufio.NewScanner(bytes.NewReader(body)); sc.Scan(); {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `code="429"`) ||
			!strings.Contains(line, `group="ray.io"`) || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		must(t, "reading "+line, err)
		n += int(v)
	}
	return n
}
