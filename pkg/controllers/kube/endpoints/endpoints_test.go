package endpoints_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/kube/endpoints"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

const ns = "ep-test"

// node is a node no kubelet serves, so the test alone writes these pods' status.
const node = "nowhere"

func start(t *testing.T) (context.Context, kubernetes.Interface) {
	t.Helper()
	in := framework.StartTest(t, framework.ControlPlaneOnly()...)
	ctrl.SetLogger(logr.Discard())
	ctx := framework.RunDuringTest(t, func(ctx context.Context) error { return endpoints.Run(ctx, in.Config) })
	c := in.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ctx, c
}

// makePod creates a pod; ports are "name=number" container ports.
func makePod(t *testing.T, ctx context.Context, c kubernetes.Interface, name string, labels map[string]string, ports map[string]int32) {
	t.Helper()
	ctr := corev1.Container{Name: "main", Image: "busybox"}
	for n, p := range ports {
		ctr.Ports = append(ctr.Ports, corev1.ContainerPort{Name: n, ContainerPort: p})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{ctr}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setStatus plays the kubelet: the pod runs with ip, ready or not.
func setStatus(t *testing.T, ctx context.Context, c kubernetes.Interface, name, ip string, ready bool) {
	t.Helper()
	framework.SetPodRunning(t, ctx, c, ns, name, ip, ready)
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// summary renders Endpoints as "ports: ready [ips] notready [ips]" lines, sorted.
func summary(ep *corev1.Endpoints) []string {
	var out []string
	for _, s := range ep.Subsets {
		var ports, ready, notReady []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s=%d", p.Name, p.Port))
		}
		sort.Strings(ports)
		for _, a := range s.Addresses {
			ready = append(ready, a.IP)
		}
		for _, a := range s.NotReadyAddresses {
			notReady = append(notReady, a.IP)
		}
		out = append(out, fmt.Sprintf("%v ready %v notready %v", ports, ready, notReady))
	}
	sort.Strings(out)
	return out
}

func getEndpoints(ctx context.Context, c kubernetes.Interface, name string, want ...string) error {
	ep, err := c.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := summary(ep); fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("endpoints %s = %q, want %q", name, got, want)
	}
	return nil
}

func slices(ctx context.Context, c kubernetes.Interface, svc string) ([]discoveryv1.EndpointSlice, error) {
	l, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// sliceSummary renders slices as "ports: ip(ready) ..." lines, sorted.
func sliceSummary(items []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range items {
		var ports, eps []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s=%d", *p.Name, *p.Port))
		}
		sort.Strings(ports)
		for _, e := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%s(ready=%v)", e.Addresses[0], *e.Conditions.Ready))
		}
		out = append(out, fmt.Sprintf("%v %v", ports, eps))
	}
	sort.Strings(out)
	return out
}

func TestEndpointsFollowPods(t *testing.T) {
	ctx, c := start(t)
	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "metrics", Port: 9090},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web := map[string]string{"app": "web"}
	makePod(t, ctx, c, "web-a", web, map[string]int32{"http": 8080})
	makePod(t, ctx, c, "web-b", web, map[string]int32{"http": 8081})
	makePod(t, ctx, c, "web-c", web, map[string]int32{"http": 8080}) // never gets an IP
	makePod(t, ctx, c, "other", map[string]string{"app": "other"}, nil)
	setStatus(t, ctx, c, "web-a", "10.244.1.1", true)
	setStatus(t, ctx, c, "web-b", "10.244.1.2", false)
	setStatus(t, ctx, c, "other", "10.244.1.9", true)

	// The named targetPort resolves per pod, so the two pods land in two subsets.
	eventually(t, "endpoints", func() error {
		return getEndpoints(ctx, c, "web",
			"[http=8080 metrics=9090] ready [10.244.1.1] notready []",
			"[http=8081 metrics=9090] ready [] notready [10.244.1.2]")
	})
	ep, _ := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
	if ep.Labels["team"] != "a" {
		t.Errorf("endpoints labels %v lack the service's", ep.Labels)
	}
	for _, s := range ep.Subsets {
		for _, a := range append(s.Addresses, s.NotReadyAddresses...) {
			if a.TargetRef == nil || a.TargetRef.Kind != "Pod" || a.TargetRef.Name == "" || a.TargetRef.UID == "" {
				t.Errorf("address %s targetRef %+v", a.IP, a.TargetRef)
			}
			if a.NodeName == nil || *a.NodeName != node {
				t.Errorf("address %s nodeName %v", a.IP, a.NodeName)
			}
		}
	}

	eventually(t, "slices", func() error {
		items, err := slices(ctx, c, "web")
		if err != nil {
			return err
		}
		got := sliceSummary(items)
		want := []string{"[http=8080 metrics=9090] [10.244.1.1(ready=true)]", "[http=8081 metrics=9090] [10.244.1.2(ready=false)]"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("slices = %q, want %q", got, want)
		}
		return nil
	})
	items, _ := slices(ctx, c, "web")
	for _, s := range items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 || s.Labels[discoveryv1.LabelManagedBy] != endpoints.ManagedBy || s.Labels["team"] != "a" {
			t.Errorf("slice %s: addressType %s labels %v", s.Name, s.AddressType, s.Labels)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != svc.UID || s.OwnerReferences[0].Kind != "Service" {
			t.Errorf("slice %s owners %+v", s.Name, s.OwnerReferences)
		}
	}

	// Nothing relevant changes: no write.
	before, _ := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, "web-a", types.MergePatchType, []byte(`{"metadata":{"labels":{"extra":"x"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	after, _ := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
	if before.ResourceVersion != after.ResourceVersion {
		t.Errorf("endpoints rewritten without a change: %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}

	// web-b becomes ready; web-a goes away.
	setStatus(t, ctx, c, "web-b", "10.244.1.2", true)
	eventually(t, "web-b ready", func() error {
		return getEndpoints(ctx, c, "web",
			"[http=8080 metrics=9090] ready [10.244.1.1] notready []",
			"[http=8081 metrics=9090] ready [10.244.1.2] notready []")
	})
	if err := c.CoreV1().Pods(ns).Delete(ctx, "web-a", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-a gone", func() error {
		return getEndpoints(ctx, c, "web", "[http=8081 metrics=9090] ready [10.244.1.2] notready []")
	})
	eventually(t, "web-a gone from slices", func() error {
		items, err := slices(ctx, c, "web")
		if err != nil {
			return err
		}
		if got, want := sliceSummary(items), []string{"[http=8081 metrics=9090] [10.244.1.2(ready=true)]"}; fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("slices = %q, want %q", got, want)
		}
		return nil
	})

	// Deleting the Service deletes what the controller made for it.
	if err := c.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "endpoints deleted", func() error {
		_, err := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("endpoints still there (%v)", err)
		}
		items, err := slices(ctx, c, "web")
		if err == nil && len(items) > 0 {
			return fmt.Errorf("%d slices left", len(items))
		}
		return err
	})
}

func TestHeadlessPublishNotReadyAndSelectorless(t *testing.T) {
	ctx, c := start(t)
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}, PublishNotReadyAddresses: true}},
		{ObjectMeta: metav1.ObjectMeta{Name: "manual", Namespace: ns}, Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Port: 5432}}}},
	} {
		if _, err := c.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	manual := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "manual", Namespace: ns},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.10"}}, Ports: []corev1.EndpointPort{{Port: 5432}}}}}
	manual, err := c.CoreV1().Endpoints(ns).Create(ctx, manual, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for i, ready := range []bool{true, false} {
		name := fmt.Sprintf("db-%d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{NodeName: node, Hostname: name, Subdomain: "db",
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setStatus(t, ctx, c, name, fmt.Sprintf("10.244.2.%d", i+1), ready)
	}
	// publishNotReadyAddresses: the not-ready pod is published as ready too; no ports on a headless service.
	eventually(t, "headless endpoints", func() error {
		return getEndpoints(ctx, c, "db", "[] ready [10.244.2.1 10.244.2.2] notready []")
	})
	ep, _ := c.CoreV1().Endpoints(ns).Get(ctx, "db", metav1.GetOptions{})
	if _, ok := ep.Labels["service.kubernetes.io/headless"]; !ok {
		t.Errorf("headless endpoints lack the headless label: %v", ep.Labels)
	}
	for _, a := range ep.Subsets[0].Addresses {
		if a.Hostname != a.TargetRef.Name {
			t.Errorf("address %s hostname %q, want %q", a.IP, a.Hostname, a.TargetRef.Name)
		}
	}
	eventually(t, "headless slices", func() error {
		items, err := slices(ctx, c, "db")
		if err != nil {
			return err
		}
		if got, want := sliceSummary(items), []string{"[] [10.244.2.1(ready=true) 10.244.2.2(ready=true)]"}; fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("slices = %q, want %q", got, want)
		}
		for _, e := range items[0].Endpoints {
			if e.Hostname == nil || *e.Hostname != e.TargetRef.Name {
				return fmt.Errorf("endpoint %v hostname %v", e.Addresses, e.Hostname)
			}
		}
		return nil
	})

	// The selector-less Service's Endpoints are the user's: untouched, and no slices made for it.
	time.Sleep(time.Second)
	got, err := c.CoreV1().Endpoints(ns).Get(ctx, "manual", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != manual.ResourceVersion || got.Subsets[0].Addresses[0].IP != "192.0.2.10" {
		t.Errorf("selector-less endpoints changed: %+v", got.Subsets)
	}
	if items, _ := slices(ctx, c, "manual"); len(items) != 0 {
		t.Errorf("slices made for a selector-less service: %d", len(items))
	}
}
