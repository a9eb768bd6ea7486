package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// TestCRUD creates, reads, lists, updates, patches and deletes each everyday kind with client-go.
func TestCRUD(t *testing.T) {
	in, ctx, ns := setup(t)
	c := in.Client

	t.Run("configmaps", func(t *testing.T) {
		api := c.CoreV1().ConfigMaps(ns)
		cm, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "crud"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
		must(t, "create", err)
		if cm.UID == "" || cm.ResourceVersion == "" || cm.CreationTimestamp.IsZero() {
			t.Errorf("created object lacks uid/resourceVersion/creationTimestamp: %+v", cm.ObjectMeta)
		}
		got, err := api.Get(ctx, "crud", metav1.GetOptions{})
		must(t, "get", err)
		if got.Data["a"] != "1" || got.UID != cm.UID {
			t.Errorf("get returned %+v", got)
		}
		got.Data["b"] = "2"
		upd, err := api.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update", err)
		if upd.ResourceVersion == got.ResourceVersion || upd.Data["b"] != "2" {
			t.Errorf("update: resourceVersion %s -> %s, data %v", got.ResourceVersion, upd.ResourceVersion, upd.Data)
		}
		pat, err := api.Patch(ctx, "crud", types.MergePatchType, []byte(`{"data":{"c":"3"}}`), metav1.PatchOptions{})
		must(t, "patch", err)
		if pat.Data["a"] != "1" || pat.Data["b"] != "2" || pat.Data["c"] != "3" {
			t.Errorf("merge patch lost data: %v", pat.Data)
		}
		// Every namespace also holds kube-root-ca.crt, as on a cluster; wait for it before listing.
		namespacePublished(t, ctx, in, ns)
		list, err := api.List(ctx, metav1.ListOptions{})
		must(t, "list", err)
		var names []string
		for _, item := range list.Items {
			names = append(names, item.Name)
		}
		sort.Strings(names)
		if strings.Join(names, ",") != "crud,kube-root-ca.crt" || list.ResourceVersion == "" {
			t.Errorf("list: items %v, rv %q; want crud and kube-root-ca.crt", names, list.ResourceVersion)
		}
		must(t, "delete", api.Delete(ctx, "crud", metav1.DeleteOptions{}))
		_, err = api.Get(ctx, "crud", metav1.GetOptions{})
		expectStatus(t, "get after delete", err, 404)
		expectStatus(t, "delete again", api.Delete(ctx, "crud", metav1.DeleteOptions{}), 404)
		_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		must(t, "create --dry-run=server", err)
		_, err = api.Get(ctx, "dry", metav1.GetOptions{})
		expectStatus(t, "get after a dry-run create", err, 404)
		_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dup"}}, metav1.CreateOptions{})
		must(t, "create dup", err)
		_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dup"}}, metav1.CreateOptions{})
		expectStatus(t, "create an existing name", err, 409)
	})

	t.Run("secrets", func(t *testing.T) {
		api := c.CoreV1().Secrets(ns)
		_, err := api.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "crud"},
			StringData: map[string]string{"password": "hunter2"},
			Data:       map[string][]byte{"token": {0, 1, 2}},
		}, metav1.CreateOptions{})
		must(t, "create", err)
		got, err := api.Get(ctx, "crud", metav1.GetOptions{})
		must(t, "get", err)
		if string(got.Data["password"]) != "hunter2" || string(got.Data["token"]) != "\x00\x01\x02" || len(got.StringData) != 0 {
			t.Errorf("secret data: %v stringData %v (stringData must be merged into data)", got.Data, got.StringData)
		}
		if got.Type != corev1.SecretTypeOpaque {
			t.Errorf("type = %q, want Opaque", got.Type)
		}
		got.Data["token"] = []byte("new")
		_, err = api.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update", err)
		_, err = api.Patch(ctx, "crud", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		must(t, "strategic merge patch", err)
		got, err = api.Get(ctx, "crud", metav1.GetOptions{})
		must(t, "get", err)
		if string(got.Data["token"]) != "new" || got.Labels["x"] != "y" {
			t.Errorf("after update+patch: data %v labels %v", got.Data, got.Labels)
		}
		must(t, "delete", api.Delete(ctx, "crud", metav1.DeleteOptions{}))
		_, err = api.Get(ctx, "crud", metav1.GetOptions{})
		expectStatus(t, "get after delete", err, 404)
	})

	t.Run("services", func(t *testing.T) {
		api := c.CoreV1().Services(ns)
		_, err := api.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "crud"},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}, metav1.CreateOptions{})
		must(t, "create", err)
		got, err := api.Get(ctx, "crud", metav1.GetOptions{})
		must(t, "get", err)
		got.Spec.Ports = append(got.Spec.Ports, corev1.ServicePort{Name: "metrics", Port: 9090})
		upd, err := api.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update", err)
		if len(upd.Spec.Ports) != 2 || upd.Spec.ClusterIP != got.Spec.ClusterIP {
			t.Errorf("update: ports %v clusterIP %q -> %q", upd.Spec.Ports, got.Spec.ClusterIP, upd.Spec.ClusterIP)
		}
		pat, err := api.Patch(ctx, "crud", types.MergePatchType, []byte(`{"spec":{"selector":{"app":"y"}}}`), metav1.PatchOptions{})
		must(t, "patch", err)
		if pat.Spec.Selector["app"] != "y" {
			t.Errorf("patch: selector %v", pat.Spec.Selector)
		}
		must(t, "delete", api.Delete(ctx, "crud", metav1.DeleteOptions{}))
		_, err = api.Get(ctx, "crud", metav1.GetOptions{})
		expectStatus(t, "get after delete", err, 404)
	})

	t.Run("pods", func(t *testing.T) {
		api := c.CoreV1().Pods(ns)
		p := unscheduledPod("crud")
		created, err := api.Create(ctx, p, metav1.CreateOptions{})
		must(t, "create", err)
		if created.Status.Phase != corev1.PodPending {
			t.Errorf("a new pod's phase = %q, want Pending", created.Status.Phase)
		}
		got, err := api.Get(ctx, "crud", metav1.GetOptions{})
		must(t, "get", err)
		got.Spec.Containers[0].Image = "busybox:1.37"
		got.Labels = map[string]string{"updated": "yes"}
		upd, err := api.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update (image and labels are mutable)", err)
		if upd.Spec.Containers[0].Image != "busybox:1.37" || upd.Labels["updated"] != "yes" {
			t.Errorf("update: image %q labels %v", upd.Spec.Containers[0].Image, upd.Labels)
		}
		_, err = api.Patch(ctx, "crud", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/annotations","value":{"k":"v"}}]`), metav1.PatchOptions{})
		must(t, "json patch", err)
		list, err := api.List(ctx, metav1.ListOptions{})
		must(t, "list", err)
		if len(list.Items) != 1 || list.Items[0].Annotations["k"] != "v" {
			t.Errorf("list: %+v", list.Items)
		}
		must(t, "delete", api.Delete(ctx, "crud", metav1.DeleteOptions{}))
		_, err = api.Get(ctx, "crud", metav1.GetOptions{})
		expectStatus(t, "get after deleting an unscheduled pod", err, 404)
	})

	t.Run("jobs", func(t *testing.T) {
		api := c.BatchV1().Jobs(ns)
		_, err := api.Create(ctx, testJob("crud"), metav1.CreateOptions{})
		must(t, "create", err)
		got, err := api.Get(ctx, "crud", metav1.GetOptions{})
		must(t, "get", err)
		got.Spec.Parallelism = ptr.To[int32](2)
		upd, err := api.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update parallelism", err)
		if *upd.Spec.Parallelism != 2 {
			t.Errorf("parallelism = %d", *upd.Spec.Parallelism)
		}
		_, err = api.Patch(ctx, "crud", types.MergePatchType, []byte(`{"metadata":{"labels":{"p":"q"}}}`), metav1.PatchOptions{})
		must(t, "patch", err)
		list, err := api.List(ctx, metav1.ListOptions{LabelSelector: "p=q"})
		must(t, "list", err)
		if len(list.Items) != 1 {
			t.Errorf("list p=q: %d items", len(list.Items))
		}
		must(t, "delete", api.Delete(ctx, "crud", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
		_, err = api.Get(ctx, "crud", metav1.GetOptions{})
		expectStatus(t, "get after delete", err, 404)
	})
}

// testJob is a Job no job controller acts on (spec.managedBy names a controller that does not exist).
func testJob(name string) *batchv1.Job {
	spec := podSpec("busybox:1.36")
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			ManagedBy: ptr.To("e2e.rayctl.io/nobody"),
			Template:  corev1.PodTemplateSpec{Spec: spec},
		},
	}
}

// TestGenerateName checks that the server completes a name from generateName.
func TestGenerateName(t *testing.T) {
	in, ctx, ns := setup(t)
	seen := map[string]bool{}
	for range 5 {
		cm, err := in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
		must(t, "create with generateName", err)
		if !strings.HasPrefix(cm.Name, "gen-") || len(cm.Name) <= len("gen-") || seen[cm.Name] {
			t.Errorf("generated name %q (seen before: %v)", cm.Name, seen[cm.Name])
		}
		seen[cm.Name] = true
		if _, err := in.Client.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("get %s: %v", cm.Name, err)
		}
	}
}

// TestResourceVersionConflict checks optimistic concurrency: an update carrying a stale resourceVersion is
// refused with 409 Conflict and changes nothing.
func TestResourceVersionConflict(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().ConfigMaps(ns)
	cm, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "rv"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
	must(t, "create", err)
	stale := cm.DeepCopy()
	cm.Data["v"] = "1"
	_, err = api.Update(ctx, cm, metav1.UpdateOptions{})
	must(t, "first update", err)
	stale.Data["v"] = "stale"
	_, err = api.Update(ctx, stale, metav1.UpdateOptions{})
	expectStatus(t, "update with a stale resourceVersion", err, 409)
	if !apierrors.IsConflict(err) {
		t.Errorf("reason = %v, want Conflict", apierrors.ReasonForError(err))
	}
	got, err := api.Get(ctx, "rv", metav1.GetOptions{})
	must(t, "get", err)
	if got.Data["v"] != "1" {
		t.Errorf("data after the refused update = %v, want v=1", got.Data)
	}
	// A patch carrying a stale resourceVersion is refused the same way.
	_, err = api.Patch(ctx, "rv", types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"data":{"v":"p"}}`, stale.ResourceVersion), metav1.PatchOptions{})
	expectStatus(t, "patch with a stale resourceVersion", err, 409)
}

// TestWatch checks that a watch started from a resourceVersion delivers exactly the changes made after it,
// in order, and that a watch asking for bookmarks receives one.
func TestWatch(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().ConfigMaps(ns)
	// The namespace's kube-root-ca.crt comes from a controller: wait for it, so that its creation is
	// not among the events watched.
	namespacePublished(t, ctx, in, ns)
	before, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{})
	must(t, "create before", err)
	from := before.ResourceVersion

	_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	must(t, "create after", err)
	_, err = api.Patch(ctx, "after", types.MergePatchType, []byte(`{"data":{"k":"v"}}`), metav1.PatchOptions{})
	must(t, "patch after", err)
	must(t, "delete before", api.Delete(ctx, "before", metav1.DeleteOptions{}))

	t.Run("resume from a resourceVersion", func(t *testing.T) {
		w, err := api.Watch(ctx, metav1.ListOptions{ResourceVersion: from})
		must(t, "watch", err)
		defer w.Stop()
		want := []string{"ADDED after", "MODIFIED after", "DELETED before"}
		var got []string
		lastRV := from
		timeout := time.After(30 * time.Second)
		for len(got) < len(want) {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch closed after %v", got)
				}
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				if !isCM {
					t.Fatalf("unexpected watch event %s %T: %+v", ev.Type, ev.Object, ev.Object)
				}
				got = append(got, fmt.Sprintf("%s %s", ev.Type, cm.Name))
				if rvLess(cm.ResourceVersion, lastRV) || cm.ResourceVersion == lastRV {
					t.Errorf("event %s %s has resourceVersion %s, not after %s", ev.Type, cm.Name, cm.ResourceVersion, lastRV)
				}
				lastRV = cm.ResourceVersion
				if ev.Type == watch.Modified && cm.Data["k"] != "v" {
					t.Errorf("MODIFIED event carries data %v", cm.Data)
				}
			case <-timeout:
				t.Fatalf("got events %v, want %v", got, want)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("events from rv %s = %v, want %v", from, got, want)
		}
		// Nothing more: a later change is the next event.
		_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{})
		must(t, "create later", err)
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || ev.Type != watch.Added || cm.Name != "later" {
				t.Errorf("next event = %s %+v, want ADDED later", ev.Type, ev.Object)
			}
		case <-time.After(30 * time.Second):
			t.Error("no event for a configmap created during the watch")
		}
	})

	t.Run("bookmarks", func(t *testing.T) {
		// A bookmark tells a watcher that the store moved on even though nothing it selects changed. The
		// API server sends one shortly before the watch's timeout (and about once a minute), carrying the
		// newest resourceVersion it has processed.
		list, err := api.List(ctx, metav1.ListOptions{})
		must(t, "list", err)
		w, err := api.Watch(ctx, metav1.ListOptions{
			ResourceVersion: list.ResourceVersion, LabelSelector: "e2e-bookmark=yes",
			AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](10),
		})
		must(t, "watch with bookmarks", err)
		defer w.Stop()
		unmatched, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unmatched"}}, metav1.CreateOptions{})
		must(t, "create a configmap the watch does not select", err)
		deadline := time.After(70 * time.Second)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch ended (timeoutSeconds=10) without a BOOKMARK event")
				}
				if ev.Type != watch.Bookmark {
					t.Fatalf("unexpected %s event on a watch that selects nothing: %+v", ev.Type, ev.Object)
				}
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok || cm.ResourceVersion == "" {
					t.Fatalf("bookmark object %T %+v has no resourceVersion", ev.Object, ev.Object)
				}
				if rvLess(cm.ResourceVersion, unmatched.ResourceVersion) {
					continue // an earlier bookmark; wait for the one that passes the write
				}
				return
			case <-deadline:
				t.Fatal("no BOOKMARK within 70s")
			}
		}
	})
}

// rvLess compares two etcd resourceVersions numerically.
func rvLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// TestLabelSelectors lists with equality, set and existence selectors.
func TestLabelSelectors(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().ConfigMaps(ns)
	for name, labels := range map[string]map[string]string{
		"a": {"tier": "web", "env": "prod"},
		"b": {"tier": "web", "env": "dev"},
		"c": {"tier": "db", "env": "prod"},
		"d": {},
	} {
		_, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		must(t, "create "+name, err)
	}
	for sel, want := range map[string]string{
		"tier=web":                          "a,b",
		"tier==web,env=prod":                "a",
		"tier!=web":                         "c,d",
		"env in (dev,prod),tier notin (db)": "a,b",
		"tier":                              "a,b,c",
		"!tier":                             "d",
		"tier=none":                         "",
	} {
		list, err := api.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Errorf("list -l %q: %v", sel, err)
			continue
		}
		if got := cmNames(list.Items); got != want {
			t.Errorf("list -l %q = [%s], want [%s]", sel, got, want)
		}
	}
	_, err := api.List(ctx, metav1.ListOptions{LabelSelector: "tier in (web"})
	expectStatus(t, "a malformed label selector", err, 400)

	// Watches honour label selectors too.
	w, err := api.Watch(ctx, metav1.ListOptions{LabelSelector: "tier=cache"})
	must(t, "watch -l tier=cache", err)
	defer w.Stop()
	_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e", Labels: map[string]string{"tier": "other"}}}, metav1.CreateOptions{})
	must(t, "create e", err)
	_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "f", Labels: map[string]string{"tier": "cache"}}}, metav1.CreateOptions{})
	must(t, "create f", err)
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || cm.Name != "f" {
			t.Errorf("first event of a watch -l tier=cache: %s %+v, want ADDED f", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Error("no event on the selective watch")
	}
}

// cmNames is the sorted names of the ConfigMaps a test made (kube-root-ca.crt, which every namespace
// holds, left out).
func cmNames(items []corev1.ConfigMap) string {
	var names []string
	for _, i := range withoutRootCA(items) {
		names = append(names, i.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func podNames(items []corev1.Pod) string {
	var names []string
	for _, i := range items {
		names = append(names, i.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// TestPodFieldSelectors lists pods by the fields kubectl and controllers select on.
func TestPodFieldSelectors(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().Pods(ns)

	p1 := boundPod("p1")
	p1.Spec.RestartPolicy = corev1.RestartPolicyNever
	p1.Spec.SchedulerName = "e2e-sched-a"
	_, err := api.Create(ctx, p1, metav1.CreateOptions{})
	must(t, "create p1", err)
	p2 := unscheduledPod("p2")
	_, err = api.Create(ctx, p2, metav1.CreateOptions{})
	must(t, "create p2", err)

	got, err := api.Get(ctx, "p1", metav1.GetOptions{})
	must(t, "get p1", err)
	got.Status.Phase = corev1.PodRunning
	got.Status.PodIP = "10.244.0.77"
	got.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.77"}}
	_, err = api.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	must(t, "update p1 status", err)

	for sel, want := range map[string]string{
		"spec.nodeName=" + fakeNode:                      "p1",
		"spec.nodeName=":                                 "p2",
		"spec.nodeName!=" + fakeNode:                     "p2",
		"status.phase=Running":                           "p1",
		"status.phase=Pending":                           "p2",
		"status.phase!=Failed":                           "p1,p2",
		"spec.restartPolicy=Never":                       "p1",
		"spec.restartPolicy=Always":                      "p2",
		"spec.schedulerName=e2e-sched-a":                 "p1",
		"spec.schedulerName=" + noScheduler:              "p2",
		"status.podIP=10.244.0.77":                       "p1",
		"metadata.name=p2":                               "p2",
		"metadata.namespace=" + ns:                       "p1,p2",
		"metadata.namespace=default":                     "",
		"status.phase=Running,spec.nodeName=" + fakeNode: "p1",
		"status.phase=Running,spec.nodeName=":            "",
	} {
		list, err := api.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Errorf("list pods --field-selector %q: %v", sel, err)
			continue
		}
		if got := podNames(list.Items); got != want {
			t.Errorf("list pods --field-selector %q = [%s], want [%s]", sel, got, want)
		}
	}

	// Across namespaces, as a kubelet lists its node's pods.
	list, err := in.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + fakeNode + ",metadata.namespace=" + ns})
	if err != nil || podNames(list.Items) != "p1" {
		t.Errorf("all-namespace list by node: %v %v", err, list)
	}

	// A watch with a field selector sees a pod enter the selection.
	w, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: "status.phase=Succeeded"})
	must(t, "watch status.phase=Succeeded", err)
	defer w.Stop()
	_, err = api.Patch(ctx, "p1", types.MergePatchType, []byte(`{"status":{"phase":"Succeeded"}}`), metav1.PatchOptions{}, "status")
	must(t, "patch p1 status", err)
	select {
	case ev := <-w.ResultChan():
		if p, ok := ev.Object.(*corev1.Pod); !ok || p.Name != "p1" || p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("field-selected watch event %s %+v", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Error("no event on a watch with --field-selector status.phase=Succeeded")
	}

	for _, sel := range []string{"spec.containers=main", "status.bogus=x", "metadata.labels=x"} {
		_, err = api.List(ctx, metav1.ListOptions{FieldSelector: sel})
		expectStatus(t, "pods --field-selector "+sel, err, 400)
		if err != nil && !apierrors.IsBadRequest(err) {
			t.Errorf("pods --field-selector %s: reason %v, want BadRequest", sel, apierrors.ReasonForError(err))
		}
	}
	_, err = in.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{FieldSelector: "data.key=x"})
	expectStatus(t, "configmaps --field-selector data.key=x", err, 400)
}

// TestEventFieldSelectors selects events by the object they are about.
func TestEventFieldSelectors(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().Events(ns)
	mk := func(name, kind, obj, reason string) {
		_, err := api.Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: obj, APIVersion: "v1"},
			Reason:         reason, Message: "e2e", Type: corev1.EventTypeNormal,
			Source:         corev1.EventSource{Component: "e2e"},
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		}, metav1.CreateOptions{})
		must(t, "create event "+name, err)
	}
	mk("e1", "Pod", "web", "Scheduled")
	mk("e2", "Pod", "db", "Pulled")
	mk("e3", "Service", "web", "Created")
	for sel, want := range map[string]string{
		"involvedObject.name=web":                         "e1,e3",
		"involvedObject.kind=Pod":                         "e1,e2",
		"involvedObject.kind=Pod,involvedObject.name=web": "e1",
		"involvedObject.namespace=" + ns:                  "e1,e2,e3",
		"reason=Pulled":                                   "e2",
		"metadata.name=e3":                                "e3",
	} {
		list, err := api.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Errorf("events --field-selector %q: %v", sel, err)
			continue
		}
		var names []string
		for _, e := range list.Items {
			names = append(names, e.Name)
		}
		sort.Strings(names)
		if got := strings.Join(names, ","); got != want {
			t.Errorf("events --field-selector %q = [%s], want [%s]", sel, got, want)
		}
	}
	_, err := api.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.color=red"})
	expectStatus(t, "events with an unsupported field label", err, 400)
}

// TestEventsBothAPIs checks that core/v1 and events.k8s.io/v1 are two views of the same events: each API
// reads what the other wrote. It runs on an instance of its own: while the two views disagree, an event
// written through one can make the other's whole watch cache unreadable, and that must not spill into the
// tests that share an instance.
func TestEventsBothAPIs(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	in := startOwn(t)
	ns := newNamespace(t, ctx, in)
	now := metav1.Now()
	_, err := in.Client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "core"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web", APIVersion: "v1"},
		Reason:         "Pulled", Message: "pulled the image", Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "kubelet", Host: fakeNode},
		FirstTimestamp: now, LastTimestamp: now, Count: 3,
	}, metav1.CreateOptions{})
	must(t, "create core/v1 event", err)
	_, err = in.Client.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "new"},
		EventTime:  metav1.NewMicroTime(time.Now()),
		Regarding:  corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "db", APIVersion: "v1"},
		Reason:     "Scheduled", Note: "assigned to a node", Type: corev1.EventTypeNormal,
		Action: "Binding", ReportingController: "e2e.rayctl.io/scheduler", ReportingInstance: "e2e-1",
	}, metav1.CreateOptions{})
	must(t, "create events.k8s.io/v1 event", err)

	ev, err := in.Client.EventsV1().Events(ns).Get(ctx, "core", metav1.GetOptions{})
	if err != nil {
		t.Errorf("events.k8s.io/v1 get of a core/v1 event: %v", err)
	} else if ev.Regarding.Name != "web" || ev.Note != "pulled the image" || ev.Reason != "Pulled" || ev.DeprecatedCount != 3 {
		t.Errorf("core/v1 event seen through events.k8s.io/v1: regarding %q note %q reason %q count %d", ev.Regarding.Name, ev.Note, ev.Reason, ev.DeprecatedCount)
	}
	ce, err := in.Client.CoreV1().Events(ns).Get(ctx, "new", metav1.GetOptions{})
	if err != nil {
		t.Errorf("core/v1 get of an events.k8s.io/v1 event: %v", err)
	} else if ce.InvolvedObject.Name != "db" || ce.Message != "assigned to a node" || ce.ReportingController != "e2e.rayctl.io/scheduler" {
		t.Errorf("events.k8s.io/v1 event seen through core/v1: involvedObject %q message %q reportingComponent %q", ce.InvolvedObject.Name, ce.Message, ce.ReportingController)
	}
	el, err := in.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(el.Items) != 2 {
		t.Errorf("events.k8s.io/v1 list: %v, %d items, want 2", err, len(el.Items))
	}
	cl, err := in.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(cl.Items) != 2 {
		t.Errorf("core/v1 list: %v, %d items, want 2", err, len(cl.Items))
	}
}

// TestPagination lists in pages with limit and continue, as kubectl does for big lists.
func TestPagination(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().ConfigMaps(ns)
	for i := range 7 {
		_, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("page-%d", i)}}, metav1.CreateOptions{})
		must(t, "create", err)
	}
	var names []string
	opts := metav1.ListOptions{Limit: 3}
	pages := 0
	for {
		list, err := api.List(ctx, opts)
		must(t, "list page", err)
		pages++
		if len(list.Items) > 3 {
			t.Fatalf("page of %d items with limit 3", len(list.Items))
		}
		for _, i := range withoutRootCA(list.Items) {
			names = append(names, i.Name)
		}
		if list.Continue == "" {
			if list.RemainingItemCount != nil && *list.RemainingItemCount != 0 {
				t.Errorf("last page says %d remain", *list.RemainingItemCount)
			}
			break
		}
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
		opts.Continue = list.Continue
	}
	if pages != 3 || len(names) != 7 || !slices.IsSorted(names) {
		t.Errorf("pages %d, names %v; want 3 pages of the 7 configmaps in order", pages, names)
	}
}

// TestMetadataFieldSelectorsEveryKind lists every listable resource with metadata.name and
// metadata.namespace field selectors, which every kind supports.
func TestMetadataFieldSelectorsEveryKind(t *testing.T) {
	in, ctx, ns := setup(t)
	dc, err := discovery.NewDiscoveryClientForConfig(in.Config)
	must(t, "discovery client", err)
	dyn, err := dynamic.NewForConfig(quiet(in.Config))
	must(t, "dynamic client", err)
	// A core/v1 event, so that both event APIs have something to list.
	_, err = in.Client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "ev"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", APIVersion: "v1"},
		Reason:         "Test", Message: "m", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "e2e"},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}, metav1.CreateOptions{})
	must(t, "create event", err)
	lists, err := dc.ServerPreferredResources()
	must(t, "discovery", err)
	n := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		must(t, "group version", err)
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			n++
			gvr := gv.WithResource(r.Name)
			var ri dynamic.ResourceInterface = dyn.Resource(gvr)
			if r.Namespaced {
				nsList, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=" + ns})
				if err != nil {
					t.Errorf("%s --field-selector metadata.namespace=%s: %v", gvr, ns, err)
				} else {
					for _, i := range nsList.Items {
						if i.GetNamespace() != ns {
							t.Errorf("%s: metadata.namespace=%s returned %s/%s", gvr, ns, i.GetNamespace(), i.GetName())
						}
					}
				}
				_, err = dyn.Resource(gvr).List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=kube-system"})
				if err != nil {
					t.Errorf("%s (all namespaces) --field-selector metadata.namespace=kube-system: %v", gvr, err)
				}
			}
			all, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Errorf("list %s: %v", gvr, err)
				continue
			}
			none, err := ri.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=e2e-no-such-object"})
			if err != nil {
				t.Errorf("%s --field-selector metadata.name=…: %v", gvr, err)
			} else if len(none.Items) != 0 {
				t.Errorf("%s --field-selector metadata.name=e2e-no-such-object returned %d items", gvr, len(none.Items))
			}
			if len(all.Items) > 0 {
				want := all.Items[0]
				one, err := ri.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + want.GetName()})
				if err != nil {
					t.Errorf("%s --field-selector metadata.name=%s: %v", gvr, want.GetName(), err)
				} else {
					for _, i := range one.Items {
						if i.GetName() != want.GetName() {
							t.Errorf("%s --field-selector metadata.name=%s returned %s", gvr, want.GetName(), i.GetName())
						}
					}
					if len(one.Items) == 0 {
						t.Errorf("%s --field-selector metadata.name=%s returned nothing", gvr, want.GetName())
					}
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d listable resources in discovery", n)
	}
}

// TestDeleteCollection deletes the objects a label selector picks, and only those.
func TestDeleteCollection(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().ConfigMaps(ns)
	for i := range 5 {
		set := "keep"
		if i < 3 {
			set = "drop"
		}
		_, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"set": set}}}, metav1.CreateOptions{})
		must(t, "create", err)
	}
	must(t, "deletecollection", api.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "set=drop"}))
	list, err := api.List(ctx, metav1.ListOptions{})
	must(t, "list", err)
	if got := cmNames(list.Items); got != "cm-3,cm-4" {
		t.Errorf("left after deleting set=drop: [%s], want [cm-3,cm-4]", got)
	}
	// Pods too (kubectl delete pods -l …); the unscheduled ones go at once.
	pods := in.Client.CoreV1().Pods(ns)
	for _, name := range []string{"x1", "x2"} {
		p := unscheduledPod(name)
		p.Labels = map[string]string{"set": "drop"}
		_, err := pods.Create(ctx, p, metav1.CreateOptions{})
		must(t, "create pod", err)
	}
	must(t, "deletecollection pods", pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "set=drop"}))
	pl, err := pods.List(ctx, metav1.ListOptions{})
	must(t, "list pods", err)
	if len(pl.Items) != 0 {
		t.Errorf("pods left: %s", podNames(pl.Items))
	}
}

// TestFinalizers checks that an object with a finalizer is only marked for deletion, and goes when its last
// finalizer is removed.
func TestFinalizers(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().ConfigMaps(ns)
	_, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"e2e.rayctl.io/hold", "e2e.rayctl.io/second"}}}, metav1.CreateOptions{})
	must(t, "create", err)
	must(t, "delete", api.Delete(ctx, "held", metav1.DeleteOptions{}))
	got, err := api.Get(ctx, "held", metav1.GetOptions{})
	must(t, "get after delete (held by finalizers)", err)
	if got.DeletionTimestamp == nil {
		t.Fatalf("deletionTimestamp not set on a deleted object with finalizers")
	}
	// Finalizers can still be removed one by one; the object stays while any is left.
	_, err = api.Patch(ctx, "held", types.JSONPatchType, []byte(`[{"op":"replace","path":"/metadata/finalizers","value":["e2e.rayctl.io/hold"]}]`), metav1.PatchOptions{})
	must(t, "remove one finalizer", err)
	got, err = api.Get(ctx, "held", metav1.GetOptions{})
	must(t, "get with one finalizer left", err)
	if got.DeletionTimestamp == nil || len(got.Finalizers) != 1 {
		t.Errorf("after removing one of two finalizers: deletionTimestamp %v finalizers %v", got.DeletionTimestamp, got.Finalizers)
	}
	w, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=held", ResourceVersion: got.ResourceVersion})
	must(t, "watch", err)
	defer w.Stop()
	_, err = api.Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	must(t, "remove the last finalizer", err)
	timeout := time.After(30 * time.Second)
	for deleted := false; !deleted; {
		select {
		case ev := <-w.ResultChan():
			deleted = ev.Type == watch.Deleted
		case <-timeout:
			t.Fatal("no DELETED event after the last finalizer went")
		}
	}
	_, err = api.Get(ctx, "held", metav1.GetOptions{})
	expectStatus(t, "get after the last finalizer went", err, 404)
}

// TestGracefulPodDeletion checks that a pod on a node is only marked for deletion (the kubelet finishes the
// job), that gracePeriodSeconds=0 removes it, and that an unscheduled pod goes at once.
func TestGracefulPodDeletion(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().Pods(ns)

	check := func(name string) {
		t.Helper()
		must(t, "delete "+name, api.Delete(ctx, name, metav1.DeleteOptions{}))
		got, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s after a graceful delete: %v (a pod on a node must stay until its kubelet confirms)", name, err)
		}
		if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
			t.Errorf("%s: deletionTimestamp %v, deletionGracePeriodSeconds %v, want set and 30", name, got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
		}
		// Deleting again with a shorter grace period shortens it; zero removes the pod.
		must(t, "delete "+name+" --grace-period=0", api.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		_, err = api.Get(ctx, name, metav1.GetOptions{})
		expectStatus(t, "get "+name+" after delete with gracePeriodSeconds=0", err, 404)
	}

	t.Run("bound at create", func(t *testing.T) {
		_, err := api.Create(ctx, boundPod("bound"), metav1.CreateOptions{})
		must(t, "create", err)
		check("bound")
	})

	t.Run("bound through pods/binding", func(t *testing.T) {
		_, err := api.Create(ctx, unscheduledPod("binding"), metav1.CreateOptions{})
		must(t, "create", err)
		err = api.Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "binding"},
			Target:     corev1.ObjectReference{Kind: "Node", Name: fakeNode},
		}, metav1.CreateOptions{})
		must(t, "bind", err)
		got, err := api.Get(ctx, "binding", metav1.GetOptions{})
		must(t, "get", err)
		if got.Spec.NodeName != fakeNode {
			t.Errorf("spec.nodeName after binding = %q, want %q", got.Spec.NodeName, fakeNode)
		}
		// A bound pod cannot be bound again.
		err = api.Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "binding"},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "e2e-node-b"},
		}, metav1.CreateOptions{})
		expectStatus(t, "binding a bound pod again", err, 409)
		check("binding")
	})

	t.Run("custom grace period", func(t *testing.T) {
		p := boundPod("custom")
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7)
		_, err := api.Create(ctx, p, metav1.CreateOptions{})
		must(t, "create", err)
		must(t, "delete", api.Delete(ctx, "custom", metav1.DeleteOptions{}))
		got, err := api.Get(ctx, "custom", metav1.GetOptions{})
		must(t, "get", err)
		if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 7 {
			t.Errorf("deletionGracePeriodSeconds = %v, want the pod's terminationGracePeriodSeconds 7", got.DeletionGracePeriodSeconds)
		}
		must(t, "force delete", api.Delete(ctx, "custom", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	})

	t.Run("unscheduled goes at once", func(t *testing.T) {
		_, err := api.Create(ctx, unscheduledPod("pending"), metav1.CreateOptions{})
		must(t, "create", err)
		must(t, "delete", api.Delete(ctx, "pending", metav1.DeleteOptions{}))
		_, err = api.Get(ctx, "pending", metav1.GetOptions{})
		expectStatus(t, "get an unscheduled pod after delete", err, 404)
	})
}

// TestStatusSubresource checks that /status writes only status and the main endpoint writes everything but
// status, for pods, services and jobs.
func TestStatusSubresource(t *testing.T) {
	in, ctx, ns := setup(t)

	t.Run("pods", func(t *testing.T) {
		api := in.Client.CoreV1().Pods(ns)
		p, err := api.Create(ctx, boundPod("st"), metav1.CreateOptions{})
		must(t, "create", err)
		p.Spec.Containers[0].Image = "changed-through-status:1"
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		got, err := api.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		must(t, "update status", err)
		if got.Spec.Containers[0].Image != "busybox:1.36" {
			t.Errorf("pods/status changed spec: image %q", got.Spec.Containers[0].Image)
		}
		if got.Status.Phase != corev1.PodRunning || len(got.Status.Conditions) != 1 {
			t.Errorf("pods/status did not write status: %+v", got.Status)
		}
		got.Status.Phase = corev1.PodFailed
		got.Spec.Containers[0].Image = "busybox:1.37"
		got, err = api.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update", err)
		if got.Status.Phase != corev1.PodRunning {
			t.Errorf("the pods endpoint changed status.phase to %q", got.Status.Phase)
		}
		if got.Spec.Containers[0].Image != "busybox:1.37" {
			t.Errorf("the pods endpoint did not change the image: %q", got.Spec.Containers[0].Image)
		}
		// Patches obey the same split.
		got, err = api.Patch(ctx, "st", types.MergePatchType, []byte(`{"status":{"phase":"Succeeded"}}`), metav1.PatchOptions{})
		must(t, "patch status through the main endpoint", err)
		if got.Status.Phase != corev1.PodRunning {
			t.Errorf("a main-endpoint patch changed status.phase to %q", got.Status.Phase)
		}
	})

	t.Run("services", func(t *testing.T) {
		api := in.Client.CoreV1().Services(ns)
		s, err := api.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "st"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		must(t, "create", err)
		cond := metav1.Condition{Type: "e2e.rayctl.io/Checked", Status: metav1.ConditionTrue, Reason: "Checked", Message: "by e2e", LastTransitionTime: metav1.Now()}
		s.Spec.Ports[0].Port = 81
		s.Status.Conditions = []metav1.Condition{cond}
		got, err := api.UpdateStatus(ctx, s, metav1.UpdateOptions{})
		must(t, "update status", err)
		if got.Spec.Ports[0].Port != 80 {
			t.Errorf("services/status changed spec.ports[0].port to %d", got.Spec.Ports[0].Port)
		}
		if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != cond.Type {
			t.Errorf("services/status did not write status: %+v", got.Status)
		}
		got.Status.Conditions = nil
		got.Spec.Ports[0].Port = 82
		got, err = api.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update", err)
		if len(got.Status.Conditions) != 1 {
			t.Errorf("the services endpoint changed status: %+v", got.Status)
		}
		if got.Spec.Ports[0].Port != 82 {
			t.Errorf("the services endpoint did not change the port: %d", got.Spec.Ports[0].Port)
		}
	})

	t.Run("jobs", func(t *testing.T) {
		api := in.Client.BatchV1().Jobs(ns)
		j, err := api.Create(ctx, testJob("st"), metav1.CreateOptions{})
		must(t, "create", err)
		now := metav1.Now()
		j.Spec.Parallelism = ptr.To[int32](3)
		j.Status.StartTime = &now
		j.Status.Active = 1
		got, err := api.UpdateStatus(ctx, j, metav1.UpdateOptions{})
		must(t, "update status", err)
		if *got.Spec.Parallelism != 1 {
			t.Errorf("jobs/status changed spec.parallelism to %d", *got.Spec.Parallelism)
		}
		if got.Status.Active != 1 || got.Status.StartTime == nil {
			t.Errorf("jobs/status did not write status: %+v", got.Status)
		}
		got.Status.Active = 5
		got.Spec.Parallelism = ptr.To[int32](2)
		got, err = api.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update", err)
		if got.Status.Active != 1 {
			t.Errorf("the jobs endpoint changed status.active to %d", got.Status.Active)
		}
		if *got.Spec.Parallelism != 2 {
			t.Errorf("the jobs endpoint did not change parallelism: %d", *got.Spec.Parallelism)
		}
	})
}

// TestServerSideApply applies configmaps with two field managers through client-go's apply configurations.
func TestServerSideApply(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().ConfigMaps(ns)
	cm, err := api.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithLabels(map[string]string{"owner": "a"}).WithData(map[string]string{"shared": "a", "only-a": "1"}), metav1.ApplyOptions{FieldManager: "manager-a"})
	must(t, "apply as manager-a", err)
	if cm.Data["shared"] != "a" || cm.UID == "" {
		t.Fatalf("applied object: %+v", cm)
	}
	// A second manager adding its own field is fine.
	cm, err = api.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"only-b": "2"}), metav1.ApplyOptions{FieldManager: "manager-b"})
	must(t, "apply as manager-b (own field)", err)
	if cm.Data["only-a"] != "1" || cm.Data["only-b"] != "2" {
		t.Errorf("after manager-b's apply: %v", cm.Data)
	}
	managers := map[string]bool{}
	for _, mf := range cm.ManagedFields {
		if mf.Operation == metav1.ManagedFieldsOperationApply {
			managers[mf.Manager] = true
		}
	}
	if !managers["manager-a"] || !managers["manager-b"] {
		t.Errorf("managedFields apply managers = %v, want manager-a and manager-b", managers)
	}
	// Changing a field another manager owns is a conflict…
	_, err = api.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"only-b": "2", "shared": "b"}), metav1.ApplyOptions{FieldManager: "manager-b"})
	expectStatus(t, "apply a field owned by another manager", err, 409, "manager-a", "data.shared")
	if err != nil && !apierrors.IsConflict(err) {
		t.Errorf("reason %v, want Conflict", apierrors.ReasonForError(err))
	}
	// …unless forced, which moves the field to the new manager.
	cm, err = api.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"only-b": "2", "shared": "b"}), metav1.ApplyOptions{FieldManager: "manager-b", Force: true})
	must(t, "forced apply", err)
	if cm.Data["shared"] != "b" {
		t.Errorf("forced apply: %v", cm.Data)
	}
	// manager-a, no longer applying only-a, drops it; its other fields stay.
	cm, err = api.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithLabels(map[string]string{"owner": "a"}), metav1.ApplyOptions{FieldManager: "manager-a"})
	must(t, "apply as manager-a without only-a", err)
	if _, ok := cm.Data["only-a"]; ok || cm.Data["shared"] != "b" || cm.Labels["owner"] != "a" {
		t.Errorf("after manager-a dropped only-a: data %v labels %v", cm.Data, cm.Labels)
	}
	// An update through the ordinary endpoint is recorded as an Update by its manager.
	cm.Data["shared"] = "c"
	cm, err = api.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "editor"})
	must(t, "update as editor", err)
	found := false
	for _, mf := range cm.ManagedFields {
		found = found || (mf.Manager == "editor" && mf.Operation == metav1.ManagedFieldsOperationUpdate)
	}
	if !found {
		t.Errorf("managedFields lack the editor's Update entry: %+v", cm.ManagedFields)
	}
	// Apply of a pod with server-side defaulting and a nested list.
	pods := in.Client.CoreV1().Pods(ns)
	pod, err := pods.Apply(ctx, corev1ac.Pod("ssa", ns).WithSpec(corev1ac.PodSpec().WithNodeName(fakeNode).
		WithContainers(corev1ac.Container().WithName("main").WithImage("busybox:1.36"))), metav1.ApplyOptions{FieldManager: "manager-a"})
	must(t, "apply a pod", err)
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Spec.Containers[0].Image != "busybox:1.36" {
		t.Errorf("applied pod: restartPolicy %q image %q", pod.Spec.RestartPolicy, pod.Spec.Containers[0].Image)
	}
	pod, err = pods.Apply(ctx, corev1ac.Pod("ssa", ns).WithSpec(corev1ac.PodSpec().WithNodeName(fakeNode).
		WithContainers(corev1ac.Container().WithName("main").WithImage("busybox:1.37"))), metav1.ApplyOptions{FieldManager: "manager-a"})
	must(t, "re-apply a pod with a new image", err)
	if pod.Spec.Containers[0].Image != "busybox:1.37" {
		t.Errorf("re-applied pod image %q", pod.Spec.Containers[0].Image)
	}
}

// TestOwnerReferences checks that ownerReferences are stored as given.
func TestOwnerReferences(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().ConfigMaps(ns)
	owner, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	must(t, "create owner", err)
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "child", OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{})
	must(t, "create child", err)
	got, err := api.Get(ctx, "child", metav1.GetOptions{})
	must(t, "get child", err)
	if len(got.OwnerReferences) != 1 {
		t.Fatalf("ownerReferences = %+v", got.OwnerReferences)
	}
	g := got.OwnerReferences[0]
	if g.APIVersion != ref.APIVersion || g.Kind != ref.Kind || g.Name != ref.Name || g.UID != ref.UID ||
		g.Controller == nil || !*g.Controller || g.BlockOwnerDeletion == nil || !*g.BlockOwnerDeletion {
		t.Errorf("ownerReference = %+v, want %+v", g, ref)
	}
	// Two controller references are invalid.
	ref2 := ref
	ref2.Name, ref2.UID = "other", "0b8e8a4e-0000-4000-8000-000000000000"
	_, err = api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two-controllers", OwnerReferences: []metav1.OwnerReference{ref, ref2}}}, metav1.CreateOptions{})
	expectStatus(t, "two controller ownerReferences", err, 422, "metadata.ownerReferences")
}

// TestDefaults checks the defaults users see in `kubectl get -o yaml`.
func TestDefaults(t *testing.T) {
	in, ctx, ns := setup(t)

	t.Run("pod", func(t *testing.T) {
		p := boundPod("defaults")
		p.Spec.Containers = []corev1.Container{
			{Name: "untagged", Image: "busybox"},
			{Name: "latest", Image: "busybox:latest"},
			{Name: "tagged", Image: "nginx:1.25", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
			{Name: "digest", Image: "nginx@sha256:0000000000000000000000000000000000000000000000000000000000000000"},
		}
		got, err := in.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(t, "create", err)
		s := got.Spec
		if s.RestartPolicy != corev1.RestartPolicyAlways {
			t.Errorf("restartPolicy = %q, want Always", s.RestartPolicy)
		}
		if s.TerminationGracePeriodSeconds == nil || *s.TerminationGracePeriodSeconds != 30 {
			t.Errorf("terminationGracePeriodSeconds = %v, want 30", s.TerminationGracePeriodSeconds)
		}
		if s.DNSPolicy != corev1.DNSClusterFirst {
			t.Errorf("dnsPolicy = %q, want ClusterFirst", s.DNSPolicy)
		}
		want := map[string]corev1.PullPolicy{"untagged": corev1.PullAlways, "latest": corev1.PullAlways, "tagged": corev1.PullIfNotPresent, "digest": corev1.PullIfNotPresent}
		for _, c := range s.Containers {
			if c.ImagePullPolicy != want[c.Name] {
				t.Errorf("container %s (%s): imagePullPolicy = %q, want %q", c.Name, c.Image, c.ImagePullPolicy, want[c.Name])
			}
		}
		if ports := s.Containers[2].Ports; len(ports) != 1 || ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("container port protocol: %+v, want TCP", ports)
		}
		if got.Status.Phase != corev1.PodPending {
			t.Errorf("status.phase = %q, want Pending", got.Status.Phase)
		}
	})

	t.Run("service", func(t *testing.T) {
		got, err := in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}},
		}, metav1.CreateOptions{})
		must(t, "create", err)
		if got.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("type = %q, want ClusterIP", got.Spec.Type)
		}
		p := got.Spec.Ports[0]
		if p.Protocol != corev1.ProtocolTCP {
			t.Errorf("port protocol = %q, want TCP", p.Protocol)
		}
		if p.TargetPort != intstr.FromInt32(8080) {
			t.Errorf("targetPort = %v, want 8080 (the port)", p.TargetPort.String())
		}
		if got.Spec.SessionAffinity != corev1.ServiceAffinityNone {
			t.Errorf("sessionAffinity = %q, want None", got.Spec.SessionAffinity)
		}
	})

	t.Run("job", func(t *testing.T) {
		got, err := in.Client.BatchV1().Jobs(ns).Create(ctx, testJob("defaults"), metav1.CreateOptions{})
		must(t, "create", err)
		s := got.Spec
		if s.BackoffLimit == nil || *s.BackoffLimit != 6 {
			t.Errorf("backoffLimit = %v, want 6", s.BackoffLimit)
		}
		if s.Completions == nil || *s.Completions != 1 || s.Parallelism == nil || *s.Parallelism != 1 {
			t.Errorf("completions %v parallelism %v, want 1 and 1", s.Completions, s.Parallelism)
		}
		uid := string(got.UID)
		if s.Selector == nil || s.Selector.MatchLabels[batchv1.ControllerUidLabel] != uid {
			t.Errorf("selector = %+v, want matchLabels %s=%s", s.Selector, batchv1.ControllerUidLabel, uid)
		}
		l := s.Template.Labels
		if l[batchv1.ControllerUidLabel] != uid || l["controller-uid"] != uid {
			t.Errorf("template labels %v lack controller-uid=%s", l, uid)
		}
		if l[batchv1.JobNameLabel] != "defaults" || l["job-name"] != "defaults" {
			t.Errorf("template labels %v lack job-name=defaults", l)
		}
		if s.ManualSelector != nil && *s.ManualSelector {
			t.Errorf("manualSelector = true")
		}
	})
}

// TestServiceClusterIP checks ClusterIP allocation: from 10.96.0.0/16, unique, headless kept, requested
// addresses honoured once, and freed on delete.
func TestServiceClusterIP(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().Services(ns)
	_, svcNet, _ := net.ParseCIDR("10.96.0.0/16")
	mk := func(name, ip string) (*corev1.Service, error) {
		return api.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
	}
	seen := map[string]string{}
	for i := range 5 {
		s, err := mk(fmt.Sprintf("auto-%d", i), "")
		must(t, "create", err)
		ip := net.ParseIP(s.Spec.ClusterIP)
		if ip == nil || !svcNet.Contains(ip) {
			t.Errorf("%s: clusterIP %q not in 10.96.0.0/16", s.Name, s.Spec.ClusterIP)
		}
		if len(s.Spec.ClusterIPs) != 1 || s.Spec.ClusterIPs[0] != s.Spec.ClusterIP {
			t.Errorf("%s: clusterIPs %v, want [%s]", s.Name, s.Spec.ClusterIPs, s.Spec.ClusterIP)
		}
		if prev, dup := seen[s.Spec.ClusterIP]; dup {
			t.Errorf("%s and %s share clusterIP %s", prev, s.Name, s.Spec.ClusterIP)
		}
		seen[s.Spec.ClusterIP] = s.Name
	}
	// The address survives an update that leaves it out.
	s, err := api.Get(ctx, "auto-0", metav1.GetOptions{})
	must(t, "get", err)
	before := s.Spec.ClusterIP
	s, err = api.Patch(ctx, "auto-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	must(t, "patch", err)
	if s.Spec.ClusterIP != before {
		t.Errorf("clusterIP changed on a label patch: %s -> %s", before, s.Spec.ClusterIP)
	}
	_, err = api.Patch(ctx, "auto-0", types.MergePatchType, []byte(`{"spec":{"clusterIP":"10.96.250.250","clusterIPs":["10.96.250.250"]}}`), metav1.PatchOptions{})
	expectStatus(t, "changing clusterIP", err, 422, "spec.clusterIP")

	headless, err := mk("headless", "None")
	must(t, "create headless", err)
	if headless.Spec.ClusterIP != "None" {
		t.Errorf("headless clusterIP = %q, want None", headless.Spec.ClusterIP)
	}

	// A requested address is honoured. Pick one at random (retrying if a parallel test holds it).
	var requested string
	for range 10 {
		ip := fmt.Sprintf("10.96.%d.%d", 100+rand.IntN(100), 2+rand.IntN(250))
		s, err := mk("requested", ip)
		if err == nil {
			if s.Spec.ClusterIP != ip {
				t.Fatalf("requested clusterIP %s, got %s", ip, s.Spec.ClusterIP)
			}
			requested = ip
			break
		}
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create with clusterIP %s: %v", ip, err)
		}
	}
	if requested == "" {
		t.Fatal("no requested clusterIP was honoured in 10 tries")
	}
	_, err = mk("duplicate", requested)
	expectStatus(t, "a duplicate requested clusterIP", err, 422, "spec.clusterIPs[0]")
	_, err = api.Get(ctx, "duplicate", metav1.GetOptions{})
	expectStatus(t, "get a service whose create was refused", err, 404)

	_, err = mk("outside", "192.168.7.7")
	expectStatus(t, "a clusterIP outside the service range", err, 422, "spec.clusterIPs[0]")

	// Freed on delete: the address can be requested again.
	must(t, "delete", api.Delete(ctx, "requested", metav1.DeleteOptions{}))
	eventually(t, ctx, 10*time.Second, "re-requesting a freed clusterIP", func(ctx context.Context) (bool, error) {
		s, err := mk("again", requested)
		if err != nil {
			return false, err
		}
		return s.Spec.ClusterIP == requested, nil
	})
}

// TestValidation checks that invalid objects are refused with 422 naming the offending field, and that a
// refused create leaves nothing behind.
func TestValidation(t *testing.T) {
	in, ctx, ns := setup(t)
	api := in.Client.CoreV1().Pods(ns)
	cases := []struct {
		name  string
		pod   *corev1.Pod
		field string
	}{
		{"no-containers", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "no-containers"}}, "spec.containers"},
		{"no-image", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "no-image"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}, "spec.containers[0].image"},
		{"Bad_Name", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}, Spec: podSpec("busybox")}, "metadata.name"},
		{"dup-containers", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dup-containers"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "x"}, {Name: "a", Image: "y"}}}}, "spec.containers[1].name"},
		{"bad-restart", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad-restart"}, Spec: corev1.PodSpec{RestartPolicy: "Sometimes", Containers: []corev1.Container{{Name: "a", Image: "x"}}}}, "spec.restartPolicy"},
		{"bad-label", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad-label", Labels: map[string]string{"a": "not valid!"}}, Spec: podSpec("busybox")}, "metadata.labels"},
	}
	for _, c := range cases {
		_, err := api.Create(ctx, c.pod, metav1.CreateOptions{})
		expectStatus(t, "create pod "+c.name, err, 422, c.field)
		if err != nil && !apierrors.IsInvalid(err) {
			t.Errorf("create pod %s: reason %v, want Invalid", c.name, apierrors.ReasonForError(err))
		}
		_, err = api.Get(ctx, c.name, metav1.GetOptions{})
		expectStatus(t, "get pod "+c.name+" after a refused create", err, 404)
	}
	list, err := api.List(ctx, metav1.ListOptions{})
	must(t, "list", err)
	if len(list.Items) != 0 {
		t.Errorf("refused creates left pods behind: %s", podNames(list.Items))
	}

	// Pod spec is immutable but for a few fields.
	_, err = api.Create(ctx, boundPod("immutable"), metav1.CreateOptions{})
	must(t, "create", err)
	p, err := api.Get(ctx, "immutable", metav1.GetOptions{})
	must(t, "get", err)
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	_, err = api.Update(ctx, p, metav1.UpdateOptions{})
	expectStatus(t, "changing a pod's restartPolicy", err, 422, "spec")
	p, _ = api.Get(ctx, "immutable", metav1.GetOptions{})
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "extra", Image: "busybox"})
	_, err = api.Update(ctx, p, metav1.UpdateOptions{})
	expectStatus(t, "adding a container to a pod", err, 422, "spec")
	got, err := api.Get(ctx, "immutable", metav1.GetOptions{})
	must(t, "get", err)
	if got.Spec.RestartPolicy != corev1.RestartPolicyAlways || len(got.Spec.Containers) != 1 {
		t.Errorf("a refused update changed the pod: restartPolicy %q, %d containers", got.Spec.RestartPolicy, len(got.Spec.Containers))
	}

	// Other kinds validate too.
	_, err = in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "no-ports"}}, metav1.CreateOptions{})
	expectStatus(t, "a ClusterIP service without ports", err, 422, "spec.ports")
	bad := testJob("bad-job")
	bad.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	_, err = in.Client.BatchV1().Jobs(ns).Create(ctx, bad, metav1.CreateOptions{})
	expectStatus(t, "a job whose pods restart Always", err, 422, "spec.template.spec.restartPolicy")
	_, err = in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad-key"}, Data: map[string]string{"no/slash": "x"}}, metav1.CreateOptions{})
	expectStatus(t, "a configmap key with a slash", err, 422, "data[no/slash]")
}

// TestSystemNamespaces checks the namespaces every cluster has, and that the essential ones cannot be
// deleted.
func TestSystemNamespaces(t *testing.T) {
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns, err := in.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("namespace %s: %v", name, err)
			continue
		}
		if ns.Status.Phase != corev1.NamespaceActive {
			t.Errorf("namespace %s phase %q, want Active", name, ns.Status.Phase)
		}
	}
	for _, name := range []string{"default", "kube-system", "kube-public"} {
		err := in.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		expectStatus(t, "deleting namespace "+name+" (dry run)", err, 403)
		if err == nil {
			// Do not really delete it: that would break the instance the other tests share.
			continue
		}
		err = in.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		expectStatus(t, "deleting namespace "+name, err, 403)
		ns, err := in.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil || ns.DeletionTimestamp != nil {
			t.Errorf("namespace %s after a refused delete: %v %v", name, err, ns)
		}
	}
	// Creating in a namespace that does not exist is refused.
	_, err := in.Client.CoreV1().ConfigMaps("e2e-no-such-namespace").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	expectStatus(t, "create in a missing namespace", err, 404, "e2e-no-such-namespace")
}
