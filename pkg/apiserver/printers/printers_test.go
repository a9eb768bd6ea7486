package printers

import (
	"context"
	appsv1 "k8s.io/api/apps/v1"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func init() { now = func() time.Time { return testNow } }

func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

func ptrTo[T any](v T) *T { return &v }

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(time.Hour)}}
}

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

func terminated(code int32, reason string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: ago(time.Minute)}}
}

func testPod(name string, mut func(p *corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(10 * time.Minute), Labels: map[string]string{"app": "ray"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	mut(p)
	return p
}

func TestPodSummary(t *testing.T) {
	cases := []struct {
		name   string
		pod    *corev1.Pod
		status string
		ready  string
		restr  int
	}{
		{"pending, nothing reported", testPod("p", func(p *corev1.Pod) {}), "Pending", "0/1", 0},
		{"running and ready", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, State: running()}}
		}), "Running", "1/1", 0},
		{"running, not ready", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: running()}}
		}), "Running", "0/1", 0},
		{"container creating", testPod("p", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: waiting("ContainerCreating")}}
		}), "ContainerCreating", "0/1", 0},
		{"crash loop", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 3, State: waiting("CrashLoopBackOff"),
				LastTerminationState: terminated(1, "Error")}}
		}), "CrashLoopBackOff", "0/1", 3},
		{"image pull", testPod("p", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: waiting("ErrImagePull")}}
		}), "ErrImagePull", "0/1", 0},
		{"completed", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: terminated(0, "Completed")}}
		}), "Completed", "0/1", 0},
		{"error", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: terminated(1, "Error")}}
		}), "Error", "0/1", 0},
		{"exit code without reason", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: terminated(137, "")}}
		}), "ExitCode:137", "0/1", 0},
		{"signal without reason", testPod("p", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Signal: 9}}}}
		}), "Signal:9", "0/1", 0},
		{"one of two completed, other running and pod ready", testPod("p", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d"})
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: terminated(0, "Completed")}, {Name: "d", Ready: true, State: running()}}
		}), "Running", "1/2", 0},
		{"one of two completed, pod not ready", testPod("p", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d"})
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: terminated(0, "Completed")}, {Name: "d", Ready: true, State: running()}}
		}), "NotReady", "1/2", 0},
		{"init waiting", testPod("p", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "wait-gcs-ready"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "wait-gcs-ready", State: running()}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: waiting("PodInitializing")}}
		}), "Init:0/1", "0/1", 0},
		{"second init running", testPod("p", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "a"}, {Name: "b"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "a", State: terminated(0, "Completed")}, {Name: "b", State: running()}}
		}), "Init:1/2", "0/1", 0},
		{"init crash loop", testPod("p", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "a"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "a", RestartCount: 2, State: waiting("CrashLoopBackOff"),
				LastTerminationState: terminated(1, "Error")}}
		}), "Init:CrashLoopBackOff", "0/1", 2},
		{"init failed", testPod("p", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "a"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "a", State: terminated(2, "")}}
		}), "Init:ExitCode:2", "0/1", 0},
		{"init failed with reason", testPod("p", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "a"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "a", State: terminated(1, "Error")}}
		}), "Init:Error", "0/1", 0},
		{"pod initializing", testPod("p", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "a"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "a", State: terminated(0, "Completed")}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: waiting("PodInitializing")}}
		}), "PodInitializing", "0/1", 0},
		{"sidecar started counts as ready", testPod("p", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "log", RestartPolicy: ptrTo(corev1.ContainerRestartPolicyAlways)}}
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "log", Started: ptrTo(true), Ready: true, RestartCount: 1,
				State: running(), LastTerminationState: terminated(1, "Error")}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, State: running(), RestartCount: 2}}
		}), "Running", "2/2", 3},
		{"terminating", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.DeletionTimestamp = ptrTo(ago(time.Second))
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, State: running()}}
		}), "Terminating", "1/1", 0},
		{"deleted after success stays completed", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.DeletionTimestamp = ptrTo(ago(time.Second))
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: terminated(0, "Completed")}}
		}), "Completed", "0/1", 0},
		{"node lost", testPod("p", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason = corev1.PodRunning, "NodeLost"
			p.DeletionTimestamp = ptrTo(ago(time.Second))
		}), "Unknown", "0/1", 0},
		{"evicted", testPod("p", func(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted" }), "Evicted", "0/1", 0},
		{"scheduling gated", testPod("p", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
		}), "SchedulingGated", "0/1", 0},
	}
	for _, tc := range cases {
		s := PodSummary(tc.pod)
		if s.Status != tc.status || formatReady(s) != tc.ready || s.Restarts != tc.restr {
			t.Errorf("%s: got status %q ready %s restarts %d, want %q %s %d", tc.name, s.Status, formatReady(s), s.Restarts, tc.status, tc.ready, tc.restr)
		}
	}
}

func formatReady(s PodStatusSummary) string {
	return string(rune('0'+s.Ready)) + "/" + string(rune('0'+s.Total))
}

func TestPodListTable(t *testing.T) {
	list := &corev1.PodList{
		ListMeta: metav1.ListMeta{ResourceVersion: "123", Continue: "next"},
		Items: []corev1.Pod{
			*testPod("raycluster-head", func(p *corev1.Pod) {
				p.Spec.NodeName = "rayctl-node"
				p.Status.Phase = corev1.PodRunning
				p.Status.PodIP, p.Status.PodIPs = "10.244.0.5", []corev1.PodIP{{IP: "10.244.0.5"}}
				p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "ray.io/ready"}}
				p.Status.Conditions = []corev1.PodCondition{{Type: "ray.io/ready", Status: corev1.ConditionTrue}}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, State: running(), RestartCount: 3,
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(5 * time.Minute)}}}}
			}),
			*testPod("job-submitter", func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodSucceeded
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: terminated(0, "Completed")}}
			}),
		},
	}
	table, err := NewPodTableConvertor().ConvertToTable(context.Background(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			names = append(names, c.Name)
		}
	}
	if want := []string{"Name", "Ready", "Status", "Restarts", "Age"}; !reflect.DeepEqual(names, want) {
		t.Errorf("columns %v", names)
	}
	if len(table.ColumnDefinitions) != 9 {
		t.Errorf("want 9 columns, got %d", len(table.ColumnDefinitions))
	}
	if table.ResourceVersion != "123" || table.Continue != "next" {
		t.Errorf("list meta %q %q", table.ResourceVersion, table.Continue)
	}
	want := [][]any{
		{"raycluster-head", "1/1", "Running", "3 (5m ago)", "10m", "10.244.0.5", "rayctl-node", "<none>", "1/1"},
		{"job-submitter", "0/1", "Completed", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}
	for i, row := range table.Rows {
		if !reflect.DeepEqual(row.Cells, want[i]) {
			t.Errorf("row %d: got %v, want %v", i, row.Cells, want[i])
		}
		partial, ok := row.Object.Object.(*metav1.PartialObjectMetadata)
		if !ok || partial.Name != list.Items[i].Name || partial.Labels["app"] != "ray" || partial.Kind != "PartialObjectMetadata" {
			t.Errorf("row %d object: %#v", i, row.Object.Object)
		}
	}
	if len(table.Rows[1].Conditions) != 1 || table.Rows[1].Conditions[0].Type != metav1.RowCompleted {
		t.Errorf("completed pod row conditions: %v", table.Rows[1].Conditions)
	}

	noHeaders, err := NewPodTableConvertor().ConvertToTable(context.Background(), list, &metav1.TableOptions{NoHeaders: true, IncludeObject: metav1.IncludeObject})
	if err != nil {
		t.Fatal(err)
	}
	if noHeaders.ColumnDefinitions != nil || len(noHeaders.Rows) != 2 {
		t.Errorf("no headers: %d columns, %d rows", len(noHeaders.ColumnDefinitions), len(noHeaders.Rows))
	}
	if _, ok := noHeaders.Rows[0].Object.Object.(*corev1.Pod); !ok {
		t.Errorf("IncludeObject=Object should embed the pod, got %T", noHeaders.Rows[0].Object.Object)
	}

	single, err := NewPodTableConvertor().ConvertToTable(context.Background(), &list.Items[0], &metav1.TableOptions{})
	if err != nil || len(single.Rows) != 1 {
		t.Fatalf("single: %v %v", single, err)
	}
	empty, err := NewPodTableConvertor().ConvertToTable(context.Background(), &corev1.PodList{}, nil)
	if err != nil || empty.Rows == nil || len(empty.Rows) != 0 {
		t.Fatalf("empty list: %#v %v", empty, err)
	}
	if _, err := NewPodTableConvertor().ConvertToTable(context.Background(), &corev1.Service{}, nil); err == nil {
		t.Errorf("printing a service as a pod should fail")
	}
}

// cells converts one object with the convertor ForKind picks and returns
// the row's cells.
func cells(t *testing.T, gk schema.GroupKind, obj runtime.Object) []any {
	t.Helper()
	c := ForKind(gk)
	if c == nil {
		t.Fatalf("no convertor for %v", gk)
	}
	table, err := c.ConvertToTable(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
		t.Fatalf("%v: %d rows, cells %v for %d columns", gk, len(table.Rows), table.Rows, len(table.ColumnDefinitions))
	}
	return table.Rows[0].Cells
}

func check(t *testing.T, what string, got, want []any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

func TestOtherKinds(t *testing.T) {
	created := metav1.ObjectMeta{Name: "x", Namespace: "default", CreationTimestamp: ago(3 * time.Hour)}
	meta := func(name string) metav1.ObjectMeta { m := created; m.Name = name; return m }

	check(t, "service", cells(t, schema.GroupKind{Kind: "Service"}, &corev1.Service{ObjectMeta: meta("head-svc"), Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.12", ClusterIPs: []string{"10.96.0.12"},
		Ports:    []corev1.ServicePort{{Port: 6379, Protocol: "TCP"}, {Port: 8265, NodePort: 30265, Protocol: "TCP"}},
		Selector: map[string]string{"ray.io/node-type": "head"}}}),
		[]any{"head-svc", "NodePort", "10.96.0.12", "<none>", "6379/TCP,8265:30265/TCP", "3h", "ray.io/node-type=head"})
	check(t, "headless service", cells(t, schema.GroupKind{Kind: "Service"}, &corev1.Service{ObjectMeta: meta("headless"), Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: "None", ClusterIPs: []string{"None"}}}),
		[]any{"headless", "ClusterIP", "None", "<none>", "<none>", "3h", "<none>"})
	check(t, "load balancer", cells(t, schema.GroupKind{Kind: "Service"}, &corev1.Service{ObjectMeta: meta("lb"), Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"10.96.0.2"}, Ports: []corev1.ServicePort{{Port: 80, Protocol: "TCP", NodePort: 31000}}}}),
		[]any{"lb", "LoadBalancer", "10.96.0.2", "<pending>", "80:31000/TCP", "3h", "<none>"})

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rayctl-node", CreationTimestamp: ago(48 * time.Hour),
		Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker"}},
		Spec: corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.2-rayctl", OSImage: "Ubuntu 24.04", KernelVersion: "6.8.0", ContainerRuntimeVersion: "containerd://2.1.0"}}}
	check(t, "node", cells(t, schema.GroupKind{Kind: "Node"}, node),
		[]any{"rayctl-node", "Ready,SchedulingDisabled", "control-plane,worker", "2d", "v1.37.2-rayctl", "192.168.1.10", "<none>", "Ubuntu 24.04", "6.8.0", "containerd://2.1.0"})
	check(t, "unknown node", cells(t, schema.GroupKind{Kind: "Node"}, &corev1.Node{ObjectMeta: meta("n")}),
		[]any{"n", "Unknown", "<none>", "3h", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"})

	check(t, "namespace", cells(t, schema.GroupKind{Kind: "Namespace"}, &corev1.Namespace{ObjectMeta: meta("ray"), Status: corev1.NamespaceStatus{Phase: "Active"}}),
		[]any{"ray", "Active", "3h"})
	check(t, "configmap", cells(t, schema.GroupKind{Kind: "ConfigMap"}, &corev1.ConfigMap{ObjectMeta: meta("cm"),
		Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": nil}}), []any{"cm", int64(2), "3h"})
	check(t, "secret", cells(t, schema.GroupKind{Kind: "Secret"}, &corev1.Secret{ObjectMeta: meta("s"), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"a": nil}}), []any{"s", "Opaque", int64(1), "3h"})
	check(t, "service account", cells(t, schema.GroupKind{Kind: "ServiceAccount"}, &corev1.ServiceAccount{ObjectMeta: meta("default")}),
		[]any{"default", int64(0), "3h"})

	check(t, "event", cells(t, schema.GroupKind{Kind: "Event"}, &corev1.Event{ObjectMeta: meta("head.1"),
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "head", FieldPath: "spec.containers{ray-head}"},
		Reason:         "Started", Message: "Started container ray-head\n", Type: "Normal", Count: 2,
		FirstTimestamp: ago(10 * time.Minute), LastTimestamp: ago(2 * time.Minute), Source: corev1.EventSource{Component: "kubelet", Host: "rayctl-node"}}),
		[]any{"2m", "Normal", "Started", "pod/head", "spec.containers{ray-head}", "kubelet, rayctl-node", "Started container ray-head", "10m", int64(2), "head.1"})
	check(t, "events/v1", cells(t, schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, &eventsv1.Event{ObjectMeta: meta("rc.1"),
		EventTime: metav1.NewMicroTime(testNow.Add(-90 * time.Second)), ReportingController: "ray.io/raycluster-controller", ReportingInstance: "rayctl",
		Regarding: corev1.ObjectReference{Kind: "RayCluster", Name: "sample"}, Reason: "CreatedService", Note: "Created service head-svc", Type: "Normal",
		Series: &eventsv1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(testNow.Add(-30 * time.Second))}}),
		[]any{"30s", "Normal", "CreatedService", "raycluster/sample", "", "ray.io/raycluster-controller, rayctl", "Created service head-svc", "90s", int64(4), "rc.1"})

	check(t, "endpoints", cells(t, schema.GroupKind{Kind: "Endpoints"}, &corev1.Endpoints{ObjectMeta: meta("svc"), Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.244.0.5"}, {IP: "10.244.0.6"}},
		Ports:     []corev1.EndpointPort{{Port: 6379}, {Port: 8265}}}}}),
		[]any{"svc", "10.244.0.5:6379,10.244.0.6:6379,10.244.0.5:8265 + 1 more...", "3h"})
	check(t, "no endpoints", cells(t, schema.GroupKind{Kind: "Endpoints"}, &corev1.Endpoints{ObjectMeta: meta("svc")}), []any{"svc", "<none>", "3h"})
	check(t, "endpoint slice", cells(t, schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}, &discoveryv1.EndpointSlice{ObjectMeta: meta("svc-abc"),
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Port: ptrTo[int32](6379)}, {Name: ptrTo("dash")}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}}}}),
		[]any{"svc-abc", "IPv4", "6379,dash", "10.244.0.5", "3h"})

	start := ago(5 * time.Minute)
	done := metav1.NewTime(start.Add(90 * time.Second))
	jobObj := &batchv1.Job{ObjectMeta: meta("submitter"), Spec: batchv1.JobSpec{Completions: ptrTo[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u"}},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "ray:1"}, {Name: "b", Image: "busybox"}}}}},
		Status: batchv1.JobStatus{Succeeded: 1, StartTime: &start, CompletionTime: &done,
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	check(t, "job", cells(t, schema.GroupKind{Group: "batch", Kind: "Job"}, jobObj),
		[]any{"submitter", "Complete", "1/1", "90s", "3h", "a,b", "ray:1,busybox", "batch.kubernetes.io/controller-uid=u"})
	runningJob := &batchv1.Job{ObjectMeta: meta("par"), Spec: batchv1.JobSpec{Parallelism: ptrTo[int32](3)}, Status: batchv1.JobStatus{StartTime: &start}}
	check(t, "running job", cells(t, schema.GroupKind{Group: "batch", Kind: "Job"}, runningJob),
		[]any{"par", "Running", "0/1 of 3", "5m", "3h", "", "", "<none>"})
	for status, conds := range map[string][]batchv1.JobCondition{
		"Failed":        {{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}},
		"Suspended":     {{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}},
		"FailureTarget": {{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}},
		"Running":       {{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse}},
	} {
		if got := JobStatus(&batchv1.Job{Status: batchv1.JobStatus{Conditions: conds}}); got != status {
			t.Errorf("job status %s: got %s", status, got)
		}
	}

	check(t, "lease", cells(t, schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, &coordinationv1.Lease{ObjectMeta: meta("rayctl-node"),
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("rayctl-node")}}), []any{"rayctl-node", "rayctl-node", "3h"})
	check(t, "role", cells(t, schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"}, &rbacv1.Role{ObjectMeta: meta("r")}),
		[]any{"r", "2025-06-01T09:00:00Z"})
	check(t, "cluster role", cells(t, schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, &rbacv1.ClusterRole{ObjectMeta: meta("cr")}),
		[]any{"cr", "2025-06-01T09:00:00Z"})
	subjects := []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"}, {Kind: "Group", Name: "devs"},
		{Kind: "ServiceAccount", Namespace: "ray-system", Name: "kuberay-operator"}}
	check(t, "role binding", cells(t, schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}, &rbacv1.RoleBinding{ObjectMeta: meta("rb"),
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subjects: subjects}),
		[]any{"rb", "ClusterRole/edit", "3h", "alice, bob", "devs", "ray-system/kuberay-operator"})
	check(t, "cluster role binding", cells(t, schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}, &rbacv1.ClusterRoleBinding{
		ObjectMeta: meta("crb"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}}),
		[]any{"crb", "ClusterRole/cluster-admin", "3h", "", "", ""})

	apps := func(kind string) schema.GroupKind { return schema.GroupKind{Group: "apps", Kind: kind} }
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "redis:7"}}}}
	check(t, "deployment", cells(t, apps("Deployment"), &appsv1.Deployment{ObjectMeta: meta("web"),
		Spec:   appsv1.DeploymentSpec{Replicas: ptrTo[int32](3), Selector: sel, Template: tmpl},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 1}}),
		[]any{"web", "2/3", int64(3), int64(1), "3h", "redis", "redis:7", "app=web"})
	check(t, "replica set", cells(t, apps("ReplicaSet"), &appsv1.ReplicaSet{ObjectMeta: meta("web-abc"),
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptrTo[int32](3), Selector: sel, Template: tmpl},
		Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1}}),
		[]any{"web-abc", int64(3), int64(2), int64(1), "3h", "redis", "redis:7", "app=web"})
	check(t, "stateful set", cells(t, apps("StatefulSet"), &appsv1.StatefulSet{ObjectMeta: meta("db"),
		Spec:   appsv1.StatefulSetSpec{Replicas: ptrTo[int32](2), Selector: sel, Template: tmpl},
		Status: appsv1.StatefulSetStatus{ReadyReplicas: 1}}),
		[]any{"db", "1/2", "3h", "redis", "redis:7"})
	dsTmpl := *tmpl.DeepCopy()
	dsTmpl.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	check(t, "daemon set", cells(t, apps("DaemonSet"), &appsv1.DaemonSet{ObjectMeta: meta("agent"),
		Spec: appsv1.DaemonSetSpec{Selector: sel, Template: dsTmpl},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberReady: 1,
			UpdatedNumberScheduled: 1, NumberAvailable: 1}}),
		[]any{"agent", int64(1), int64(1), int64(1), int64(1), int64(1), "kubernetes.io/os=linux", "3h", "redis", "redis:7", "app=web"})
	rev := &appsv1.ControllerRevision{ObjectMeta: meta("db-5d8f"), Revision: 2}
	rev.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptrTo(true)}}
	check(t, "controller revision", cells(t, apps("ControllerRevision"), rev), []any{"db-5d8f", "statefulset.apps/db", int64(2), "3h"})
	if Age(metav1.Time{}) != "<unknown>" {
		t.Errorf("zero age")
	}
}
