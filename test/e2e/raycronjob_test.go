package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// cronJobYAML is the sample RayCronJob (configs/samples/raycronjob.yaml) with the given name, schedule
// and time zone.
func cronJobYAML(t *testing.T, name, schedule, timeZone string) string {
	t.Helper()
	obj := map[string]any{}
	loadSample(t, "raycronjob.yaml", &obj)
	u := unstructured.Unstructured{Object: obj}
	u.SetName(name)
	must(t, "setting the schedule", unstructured.SetNestedField(u.Object, schedule, "spec", "schedule"))
	must(t, "setting the time zone", unstructured.SetNestedField(u.Object, timeZone, "spec", "timeZone"))
	b, err := yaml.Marshal(u.Object)
	must(t, "encoding the RayCronJob", err)
	return string(b)
}

// testCronJob applies a RayCronJob with kubectl as a user would (v1.7's timeZone included, under
// kubectl's strict field validation) and checks KubeRay v1.7's behaviour: a RayJob per scheduled time,
// named <cronjob>-<time>, labelled, annotated and owned by the RayCronJob, which completes on raysim;
// lastScheduleTime recorded and shown by kubectl get; suspend holds new RayJobs back; an invalid time
// zone is a Warning event; deleting the RayCronJob deletes its RayJobs.
func testCronJob(t *testing.T, e *rayEnv) {
	const name, every = "nightly", 15 * time.Second
	out, stderr, err := e.in.Kubectl(e.ctx, cronJobYAML(t, name, "@every 15s", "Europe/Paris"), "apply", "-n", e.ns, "-f", "-")
	must(t, "kubectl apply the RayCronJob: "+stderr, err)
	t.Logf("kubectl apply: %s", strings.TrimSpace(out))

	var first rayv1.RayJob
	e.waitFor(t, every+time.Minute, "the first scheduled RayJob", func(ctx context.Context) (bool, string, error) {
		l, err := e.ray.RayV1().RayJobs(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cronjob-name=" + name})
		if err != nil || len(l.Items) == 0 {
			return false, "no RayJob", err
		}
		first = l.Items[0]
		return true, "", nil
	})
	if !regexp.MustCompile("^" + name + `-\d+$`).MatchString(first.Name) {
		t.Errorf("RayJob name %q, want %s-<scheduled time>", first.Name, name)
	}
	if _, err := time.Parse(time.RFC3339, first.Annotations["ray.io/cronjob-scheduled-timestamp"]); err != nil {
		t.Errorf("annotation ray.io/cronjob-scheduled-timestamp: %v (annotations %v)", err, first.Annotations)
	}
	if ref := metav1.GetControllerOf(&first); ref == nil || ref.Kind != "RayCronJob" || ref.Name != name {
		t.Errorf("RayJob %s controller reference %+v, want the RayCronJob %s", first.Name, ref, name)
	}
	done := e.waitJobFinished(t, first.Name)
	if done.Status.JobStatus != rayv1.JobStatusSucceeded {
		t.Errorf("scheduled RayJob %s ended %s/%s (%s)", first.Name, done.Status.JobDeploymentStatus, done.Status.JobStatus, done.Status.Message)
	}

	get, stderr, err := e.in.Kubectl(e.ctx, "", "get", "raycronjob", name, "-n", e.ns)
	must(t, "kubectl get raycronjob: "+stderr, err)
	t.Logf("kubectl get raycronjob:\n%s", get)
	if header := strings.Fields(strings.SplitN(get, "\n", 2)[0]); strings.Join(header, " ") != "NAME SCHEDULE TIMEZONE LAST SCHEDULE AGE SUSPEND" {
		t.Errorf("kubectl get columns %q, want KubeRay v1.7's", header)
	}
	if !strings.Contains(get, "Europe/Paris") {
		t.Errorf("kubectl get does not show the time zone:\n%s", get)
	}

	// Suspended: once the controller has seen it, a scheduled time passes and no RayJob comes.
	patch := []byte(`{"spec":{"suspend":true}}`)
	_, err = e.ray.RayV1().RayCronJobs(e.ns).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, "suspending the RayCronJob", err)
	waitObjectEvent(t, e, "RayCronJob", name, "SuspendedRayCronJob")
	before := cronRayJobs(t, e, name)
	time.Sleep(every + 3*time.Second)
	if after := cronRayJobs(t, e, name); len(after) != len(before) {
		t.Errorf("suspended RayCronJob created RayJobs: %v, then %v", before, after)
	}

	// A time zone that does not exist: the spec is reported, nothing runs.
	_, stderr, err = e.in.Kubectl(e.ctx, cronJobYAML(t, "bad-zone", "@every 15s", "Mars/Olympus_Mons"), "apply", "-n", e.ns, "-f", "-")
	must(t, "kubectl apply a RayCronJob with an unknown zone: "+stderr, err)
	ev := waitObjectEvent(t, e, "RayCronJob", "bad-zone", "InvalidRayCronJobSpec")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "invalid time zone") {
		t.Errorf("event %s %q, want a Warning naming the time zone", ev.Type, ev.Message)
	}

	// Deleting the RayCronJob deletes its RayJobs (the garbage collector follows the owner reference).
	must(t, "deleting the RayCronJob", e.ray.RayV1().RayCronJobs(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{}))
	e.waitFor(t, time.Minute, "the RayCronJob's RayJobs deleted", func(ctx context.Context) (bool, string, error) {
		left := cronRayJobs(t, e, name)
		return len(left) == 0, fmt.Sprint(left), nil
	})
}

// cronRayJobs lists the names of the RayJobs of RayCronJob name.
func cronRayJobs(t *testing.T, e *rayEnv, name string) []string {
	t.Helper()
	l, err := e.ray.RayV1().RayJobs(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "ray.io/cronjob-name=" + name})
	must(t, "listing RayJobs", err)
	var names []string
	for _, j := range l.Items {
		names = append(names, j.Name)
	}
	return names
}

// waitObjectEvent waits for an event of reason about the object kind/name in the test's namespace.
func waitObjectEvent(t *testing.T, e *rayEnv, kind, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "reason": reason}.AsSelector().String()
	e.waitFor(t, time.Minute, kind+" "+name+" event "+reason, func(ctx context.Context) (bool, string, error) {
		l, err := e.in.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(l.Items) == 0 {
			return false, "none", err
		}
		found = l.Items[0]
		return true, "", nil
	})
	return found
}

// v17ClusterYAML is a RayCluster using fields KubeRay v1.7 added, as its docs show them.
const v17ClusterYAML = `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: v17
spec:
  tlsOptions:
    enabled: true
  networkPolicy:
    mode: DenyAllIngress
  gcsFaultToleranceOptions:
    backend: rocksdb
    storage:
      size: 1Gi
  autoscalerOptions:
    command: ["ray"]
    args: ["kuberay-autoscaler"]
  headGroupSpec:
    rayStartParams: {}
    ingressOptions:
      host: ray.example
      pathType: Prefix
    template:
      spec:
        containers:
        - name: ray-head
          image: rayctl.local/raysim:latest
  workerGroupSpecs:
  - groupName: small
    priority: 2
    replicas: 0
    minReplicas: 0
    maxReplicas: 1
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayctl.local/raysim:latest
`

// TestKubeRayV17Fields applies KubeRay v1.7 manifests with kubectl's strict validation: the new fields
// are accepted and kept (not pruned), a field v1.7 does not define is still refused, and every new field
// rayctl does not act on is named in a Warning event of the object. A RayJob's embedded cluster spec
// keeps its v1.7 fields through the controller's own writes (its finalizer).
func TestKubeRayV17Fields(t *testing.T) {
	in, ctx, ns := setup(t)
	_, stderr, err := in.Kubectl(ctx, v17ClusterYAML, "apply", "-n", ns, "-f", "-")
	must(t, "kubectl apply a v1.7 RayCluster: "+stderr, err)
	dyn, err := dynamic.NewForConfig(in.Config)
	must(t, "a dynamic client", err)
	c, err := dyn.Resource(rayClusterGVR).Namespace(ns).Get(ctx, "v17", metav1.GetOptions{})
	must(t, "reading the RayCluster", err)
	for _, path := range [][]string{
		{"spec", "tlsOptions", "enabled"}, {"spec", "networkPolicy", "mode"}, {"spec", "gcsFaultToleranceOptions", "backend"},
		{"spec", "headGroupSpec", "ingressOptions", "host"}, {"spec", "autoscalerOptions", "args"},
	} {
		if _, ok, _ := unstructured.NestedFieldNoCopy(c.Object, path...); !ok {
			t.Errorf("%s was not kept", strings.Join(path, "."))
		}
	}
	wanted := []string{"spec.tlsOptions", "spec.gcsFaultToleranceOptions.backend: rocksdb",
		"spec.gcsFaultToleranceOptions.storage", "spec.headGroupSpec.ingressOptions", "spec.workerGroupSpecs[].priority",
		"spec.autoscalerOptions.command", "spec.autoscalerOptions.args"}
	eventually(t, ctx, time.Minute, "UnsupportedField events naming each field", func(ctx context.Context) (bool, error) {
		missing := unreportedFields(ctx, t, in.Client.CoreV1().Events(ns), "RayCluster", "v17", wanted)
		return len(missing) == 0, nil
	})

	bad := strings.Replace(v17ClusterYAML, "tlsOptions:", "tlsOption:", 1)
	_, stderr, err = in.Kubectl(ctx, strings.Replace(bad, "name: v17", "name: v17-typo", 1), "apply", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(stderr, `unknown field "spec.tlsOption"`) {
		t.Errorf("a field v1.7 does not define: err=%v, stderr %q; want kubectl's unknown field error", err, stderr)
	}

	job := fmt.Sprintf(`
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: v17-job
spec:
  suspend: true
  shutdownAfterJobFinishes: true
  entrypoint: echo hi
  rayClusterSpec:
%s`, indent(clusterSpecOf(t, v17ClusterYAML), "    "))
	_, stderr, err = in.Kubectl(ctx, job, "apply", "-n", ns, "-f", "-")
	must(t, "kubectl apply a RayJob with a v1.7 cluster spec: "+stderr, err)
	eventually(t, ctx, time.Minute, "the RayJob's finalizer, with its v1.7 fields kept", func(ctx context.Context) (bool, error) {
		j, err := dyn.Resource(rayJobGVR).Namespace(ns).Get(ctx, "v17-job", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(j.GetFinalizers()) == 0 {
			return false, nil
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(j.Object, "spec", "rayClusterSpec", "tlsOptions", "enabled"); !ok {
			t.Fatalf("the controller's finalizer write dropped spec.rayClusterSpec.tlsOptions: %v", j.Object["spec"])
		}
		return true, nil
	})
	eventually(t, ctx, time.Minute, "the RayJob's UnsupportedField events", func(ctx context.Context) (bool, error) {
		return len(unreportedFields(ctx, t, in.Client.CoreV1().Events(ns), "RayJob", "v17-job", []string{"spec.rayClusterSpec.tlsOptions"})) == 0, nil
	})
}

// unreportedFields returns the fields of wanted that no UnsupportedField Warning of kind/name mentions.
func unreportedFields(ctx context.Context, t *testing.T, events interface {
	List(context.Context, metav1.ListOptions) (*corev1.EventList, error)
}, kind, name string, wanted []string) []string {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "reason": "UnsupportedField"}.AsSelector().String()
	l, err := events.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Logf("listing events: %v", err)
		return wanted
	}
	var missing []string
	for _, w := range wanted {
		found := false
		for _, ev := range l.Items {
			found = found || (ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, w+" is accepted"))
		}
		if !found {
			missing = append(missing, w)
		}
	}
	return missing
}

// clusterSpecOf returns the spec of a RayCluster manifest as YAML.
func clusterSpecOf(t *testing.T, manifest string) string {
	t.Helper()
	obj := map[string]any{}
	must(t, "decoding the RayCluster", yaml.Unmarshal([]byte(manifest), &obj))
	b, err := yaml.Marshal(obj["spec"])
	must(t, "encoding its spec", err)
	return string(b)
}

// indent prefixes every line of s with prefix.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
