package e2e

// apps/v1 on the shared instance, driven as a user drives a cluster: `kubectl create deployment`,
// `expose`, `scale`, `set image`, `rollout status|undo|restart|history`, a StatefulSet behind a headless
// Service, and a DaemonSet. The "Redis" is busybox's nc from the preloaded raysim image answering RESP's
// PING with +PONG: enough for a client pod to reach it by Service name, with no pulled image.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// respPong is a shell program serving RESP on 6379: PING gets +PONG. It exits at SIGTERM (a shell as
// PID 1 would otherwise sit out the grace period).
var respPong = respServer("")

// respServer is respPong as a small Redis (RESP arrays, or inline commands such as a bare PING): when
// password is set, every command but AUTH gets -NOAUTH until AUTH with that password (+OK; a wrong one
// -WRONGPASS). Its keys are the files of /tmp/redis-keys, created empty from keys: SCAN with MATCH
// answers every matching key on one page (cursor 0), DEL removes keys and counts them, INFO CLUSTER says
// it is no Redis cluster and INFO of any other section is empty (no sentinel) — what Ray's Redis cleanup
// sends. password must be plain letters and digits, keys plain file names. (The program never
// puts two $ side by side: the kubelet reads "$$" in a container's arguments as an escaped "$".)
func respServer(password string, keys ...string) string {
	authed, check := "1", "1 = 1"
	if password != "" {
		authed, check = "0", `"$p" = "`+password+`"`
	}
	seed := "mkdir -p /tmp/redis-keys"
	for _, k := range keys {
		seed += `; touch "/tmp/redis-keys/` + k + `"`
	}
	return `trap 'exit 0' TERM; ` + seed + `; nc -ll -p 6379 -e sh -c 'a=` + authed + `; cr=$(printf "\r"); n=0; set --; ` +
		`while read -r l; do l=${l%"$cr"}; case "$l" in "*"*) n=${l#"*"}; set --; continue;; "$"*) continue;; esac; ` +
		`set -- "$@" "$l"; [ $# -lt $n ] && continue; n=0; c=$(echo "$1" | tr a-z A-Z); ` +
		`if [ $a = 0 ] && [ "$c" != AUTH ]; then printf "%s\r\n" "-NOAUTH Authentication required."; set --; continue; fi; ` +
		`case "$c" in ` +
		`PING) printf "+PONG\r\n";; ` +
		`INFO) if [ "$(echo "$2" | tr a-z A-Z)" = CLUSTER ]; then printf "\$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n"; else printf "\$0\r\n\r\n"; fi;; ` +
		`AUTH) eval p=\${$#}; if [ ` + check + ` ]; then a=1; printf "+OK\r\n"; else printf "%s\r\n" "-WRONGPASS invalid username-password pair"; fi;; ` +
		`SCAN) ks=""; k=0; for f in /tmp/redis-keys/*; do b=${f##*/}; case "$b" in $4) ks="$ks\$""${#b}\r\n$b\r\n"; k=$((k+1));; esac; done; printf "*2\r\n\$1\r\n0\r\n*$k\r\n$ks";; ` +
		`DEL) shift; k=0; for b in "$@"; do [ -e "/tmp/redis-keys/$b" ] && rm -f "/tmp/redis-keys/$b" && k=$((k+1)); done; printf ":$k\r\n";; ` +
		`*) printf "%s\r\n" "-ERR unknown command";; ` +
		`esac; set --; done' & wait`
}

// sleeper runs until SIGTERM.
var sleeper = []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}

// kubectlOK runs kubectl in ns and fails the test on an error.
func kubectlOK(t *testing.T, ctx context.Context, in *framework.Instance, ns string, args ...string) string {
	t.Helper()
	out, stderr, err := in.Kubectl(ctx, "", append([]string{"-n", ns}, args...)...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// clientPod starts a pod that sleeps, to exec commands in, and waits until it runs.
func clientPod(t *testing.T, ctx context.Context, in *framework.Instance, ns string) {
	t.Helper()
	kubectlOK(t, ctx, in, ns, "run", "client", "--image="+simImage, "--restart=Never", "--", "sh", "-c", sleeper[2])
	kubectlOK(t, ctx, in, ns, "wait", "--for=condition=Ready", "pod/client", "--timeout=60s")
}

// ping sends PING to addr:6379 from the client pod until +PONG comes back.
func ping(t *testing.T, ctx context.Context, in *framework.Instance, ns, addr string) {
	t.Helper()
	eventually(t, ctx, 60*time.Second, "PONG from "+addr, func(ctx context.Context) (bool, error) {
		out, stderr, err := in.Kubectl(ctx, "", "-n", ns, "exec", "client", "--", "sh", "-c", "printf 'PING\\r\\n' | nc -w 2 "+addr+" 6379")
		if err != nil || !strings.Contains(out, "+PONG") {
			return false, fmt.Errorf("no +PONG (%v): %s%s", err, out, stderr)
		}
		return true, nil
	})
}

// replicaSets returns the Deployment's ReplicaSets by name.
func replicaSets(t *testing.T, ctx context.Context, in *framework.Instance, ns string) map[string]*appsv1.ReplicaSet {
	t.Helper()
	list, err := in.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing replica sets", err)
	out := map[string]*appsv1.ReplicaSet{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// onlyActive returns the one ReplicaSet with replicas, failing if there is not exactly one.
func onlyActive(t *testing.T, sets map[string]*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	t.Helper()
	var active []*appsv1.ReplicaSet
	for _, rs := range sets {
		if *rs.Spec.Replicas > 0 {
			active = append(active, rs)
		}
	}
	if len(active) != 1 {
		t.Fatalf("want one replica set with replicas, got %d of %d", len(active), len(sets))
	}
	return active[0]
}

func TestDeployment(t *testing.T) {
	in, _, ns := setup(t)
	// Six rollouts: a minute and a half on an idle 2-core machine, more while others build.
	ctx := framework.TestContext(t, 4*time.Minute)

	kubectlOK(t, ctx, in, ns, "create", "deployment", "redis", "--image="+simImage, "--replicas=2", "--port=6379", "--", "sh", "-c", respPong)
	kubectlOK(t, ctx, in, ns, "expose", "deployment", "redis", "--port=6379")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "deployment/redis", "--timeout=60s")
	clientPod(t, ctx, in, ns)
	ping(t, ctx, in, ns, "redis."+ns+".svc.cluster.local")
	ping(t, ctx, in, ns, "redis")

	out := kubectlOK(t, ctx, in, ns, "get", "deployment", "redis")
	if fields := strings.Fields(out); len(fields) < 10 || strings.Join(fields[:5], " ") != "NAME READY UP-TO-DATE AVAILABLE AGE" ||
		strings.Join(fields[5:9], " ") != "redis 2/2 2 2" {
		t.Errorf("kubectl get deployment:\n%s", out)
	}
	first := onlyActive(t, replicaSets(t, ctx, in, ns))
	if first.Annotations["deployment.kubernetes.io/revision"] != "1" || first.Labels["pod-template-hash"] == "" ||
		!strings.HasPrefix(first.Name, "redis-") {
		t.Errorf("first replica set %s: annotations %v labels %v", first.Name, first.Annotations, first.Labels)
	}

	// Scale through the scale subresource, as kubectl does.
	kubectlOK(t, ctx, in, ns, "scale", "deployment/redis", "--replicas=3")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "deployment/redis", "--timeout=60s")
	scale, err := in.Client.AppsV1().Deployments(ns).GetScale(ctx, "redis", metav1.GetOptions{})
	must(t, "reading the scale", err)
	if scale.Spec.Replicas != 3 || scale.Status.Replicas != 3 || scale.Status.Selector != "app=redis" {
		t.Errorf("scale: %+v", scale)
	}
	_, err = in.Client.AppsV1().Deployments(ns).UpdateScale(ctx, "redis", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "redis", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: -1}}, metav1.UpdateOptions{})
	expectStatus(t, "scaling to -1", err, 422, "spec.replicas")
	// Back to two, so that each rollout below replaces two pods.
	kubectlOK(t, ctx, in, ns, "scale", "deployment/redis", "--replicas=2")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "deployment/redis", "--timeout=60s")

	// A new image rolls out as a new ReplicaSet; the old one is scaled to zero and kept.
	kubectlOK(t, ctx, in, ns, "set", "image", "deployment/redis", "raysim="+strings.TrimSuffix(simImage, ":latest"))
	kubectlOK(t, ctx, in, ns, "rollout", "status", "deployment/redis", "--timeout=60s")
	sets := replicaSets(t, ctx, in, ns)
	second := onlyActive(t, sets)
	if len(sets) != 2 || second.Name == first.Name || *second.Spec.Replicas != 2 || second.Annotations["deployment.kubernetes.io/revision"] != "2" {
		t.Fatalf("after set image: %d replica sets, active %s (%d, revision %s)", len(sets), second.Name, *second.Spec.Replicas, second.Annotations["deployment.kubernetes.io/revision"])
	}
	ping(t, ctx, in, ns, "redis")

	// An image that cannot run stalls the rollout; maxUnavailable (25% of 2 = 0) keeps every old pod.
	kubectlOK(t, ctx, in, ns, "set", "image", "deployment/redis", "raysim=rayctl.local/no-such-image:1")
	if _, _, err := in.Kubectl(ctx, "", "-n", ns, "rollout", "status", "deployment/redis", "--timeout=5s"); err == nil {
		t.Errorf("rollout status of a stalled rollout succeeded")
	}
	if rs, err := in.Client.AppsV1().ReplicaSets(ns).Get(ctx, second.Name, metav1.GetOptions{}); err != nil || rs.Status.ReadyReplicas != 2 {
		t.Errorf("the working replica set during a stalled rollout: %v, %+v", err, rs.Status)
	}
	ping(t, ctx, in, ns, "redis")

	// Undo goes back to the second template: its ReplicaSet again, renumbered 4.
	kubectlOK(t, ctx, in, ns, "rollout", "undo", "deployment/redis")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "deployment/redis", "--timeout=60s")
	back := onlyActive(t, replicaSets(t, ctx, in, ns))
	if back.Name != second.Name || back.Annotations["deployment.kubernetes.io/revision"] != "4" {
		t.Errorf("after undo: active %s revision %s, want %s revision 4", back.Name, back.Annotations["deployment.kubernetes.io/revision"], second.Name)
	}

	// Restart stamps the template, so every pod is replaced by a new ReplicaSet's.
	kubectlOK(t, ctx, in, ns, "rollout", "restart", "deployment/redis")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "deployment/redis", "--timeout=60s")
	restarted := onlyActive(t, replicaSets(t, ctx, in, ns))
	if restarted.Name == second.Name || restarted.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
		t.Errorf("after restart: active %s, template annotations %v", restarted.Name, restarted.Spec.Template.Annotations)
	}
	history := kubectlOK(t, ctx, in, ns, "rollout", "history", "deployment/redis")
	for _, rev := range []string{"1", "3", "4", "5"} {
		if !strings.Contains(history, "\n"+rev+" ") {
			t.Errorf("rollout history lacks revision %s:\n%s", rev, history)
		}
	}
	// A paused Deployment takes template changes without rolling them out, until resumed.
	kubectlOK(t, ctx, in, ns, "rollout", "pause", "deployment/redis")
	kubectlOK(t, ctx, in, ns, "set", "env", "deployment/redis", "PAUSED=1")
	eventually(t, ctx, 30*time.Second, "the paused change observed", func(ctx context.Context) (bool, error) {
		d, err := in.Client.AppsV1().Deployments(ns).Get(ctx, "redis", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation, err
	})
	if sets := replicaSets(t, ctx, in, ns); onlyActive(t, sets).Name != restarted.Name || len(sets) != 4 {
		t.Errorf("a paused deployment rolled out: %d replica sets", len(sets))
	}
	kubectlOK(t, ctx, in, ns, "rollout", "resume", "deployment/redis")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "deployment/redis", "--timeout=60s")
	if onlyActive(t, replicaSets(t, ctx, in, ns)).Name == restarted.Name {
		t.Errorf("resuming did not roll the paused change out")
	}
	d, err := in.Client.AppsV1().Deployments(ns).Get(ctx, "redis", metav1.GetOptions{})
	must(t, "reading the deployment", err)
	if d.Status.ObservedGeneration != d.Generation || d.Annotations["deployment.kubernetes.io/revision"] != "6" {
		t.Errorf("deployment: generation %d observed %d, revision %s", d.Generation, d.Status.ObservedGeneration, d.Annotations["deployment.kubernetes.io/revision"])
	}
	ping(t, ctx, in, ns, "redis")

	// Bad input is a 422 naming the field.
	bad := d.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "bad"}
	bad.Spec.Template.Labels = map[string]string{"app": "other"}
	_, err = in.Client.AppsV1().Deployments(ns).Create(ctx, bad, metav1.CreateOptions{})
	expectStatus(t, "a selector that misses the template", err, 422, "spec.template.metadata.labels")
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "redis", "x": "y"}}
	d.Spec.Template.Labels["x"] = "y"
	_, err = in.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	expectStatus(t, "changing the selector", err, 422, "spec.selector")
}

func TestStatefulSet(t *testing.T) {
	in, _, ns := setup(t)
	ctx := framework.TestContext(t, 3*time.Minute)

	// Watch the pods from the start, to see the order in which they come.
	w, err := in.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	must(t, "watching pods", err)
	var mu sync.Mutex
	var order []string
	readyWhenNextCame := map[string]bool{}
	ready := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			mu.Lock()
			if ev.Type == watch.Added && strings.HasPrefix(pod.Name, "web-") {
				order = append(order, pod.Name)
				if pod.Name == "web-1" {
					readyWhenNextCame["web-0"] = ready["web-0"]
				}
			}
			ready[pod.Name] = runningReady(pod)
			mu.Unlock()
		}
	}()
	defer w.Stop()

	kubectlOK(t, ctx, in, ns, "create", "service", "clusterip", "web", "--clusterip=None", "--tcp=80:80")
	grace := int64(1)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "web",
			Replicas:    ptr.To[int32](2),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{Name: "main", Image: simImage, Command: sleeper}}},
			},
		},
	}
	_, err = in.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	must(t, "creating the statefulset", err)
	kubectlOK(t, ctx, in, ns, "rollout", "status", "statefulset/web", "--timeout=60s")
	mu.Lock()
	if len(order) < 2 || order[0] != "web-0" || order[1] != "web-1" || !readyWhenNextCame["web-0"] {
		t.Errorf("pods came in order %v; web-0 ready when web-1 came: %v", order, readyWhenNextCame["web-0"])
	}
	mu.Unlock()

	out := kubectlOK(t, ctx, in, ns, "get", "statefulset", "web")
	if fields := strings.Fields(out); len(fields) < 6 || strings.Join(fields[:3], " ") != "NAME READY AGE" || strings.Join(fields[3:5], " ") != "web 2/2" {
		t.Errorf("kubectl get statefulset:\n%s", out)
	}
	if got := strings.TrimSpace(kubectlOK(t, ctx, in, ns, "exec", "web-1", "--", "hostname")); got != "web-1" {
		t.Errorf("hostname of web-1: %q", got)
	}
	web0, err := in.Client.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
	must(t, "reading web-0", err)
	lookup := kubectlOK(t, ctx, in, ns, "exec", "web-1", "--", "nslookup", "web-0.web."+ns+".svc.cluster.local")
	if !strings.Contains(lookup, web0.Status.PodIP) {
		t.Errorf("web-0.web resolves to\n%s\nnot web-0's %s", lookup, web0.Status.PodIP)
	}

	// A deleted pod comes back under its name.
	must(t, "deleting web-0", in.Client.CoreV1().Pods(ns).Delete(ctx, "web-0", metav1.DeleteOptions{}))
	eventually(t, ctx, 60*time.Second, "web-0 back and ready", func(ctx context.Context) (bool, error) {
		p, err := in.Client.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.UID != web0.UID && runningReady(p), nil
	})
	if got := strings.TrimSpace(kubectlOK(t, ctx, in, ns, "exec", "web-0", "--", "hostname")); got != "web-0" {
		t.Errorf("hostname of the new web-0: %q", got)
	}

	// Scaling up adds the next ordinal; down removes the highest first.
	kubectlOK(t, ctx, in, ns, "scale", "statefulset/web", "--replicas=3")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "statefulset/web", "--timeout=60s")
	kubectlOK(t, ctx, in, ns, "scale", "statefulset/web", "--replicas=1")
	eventually(t, ctx, 60*time.Second, "only web-0 left", func(ctx context.Context) (bool, error) {
		list, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 1 && list.Items[0].Name == "web-0", nil
	})

	// A template change is a new ControllerRevision, rolled out to the pods.
	kubectlOK(t, ctx, in, ns, "set", "env", "statefulset/web", "GREETING=hello")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "statefulset/web", "--timeout=60s")
	if got := kubectlOK(t, ctx, in, ns, "exec", "web-0", "--", "sh", "-c", "echo $GREETING"); strings.TrimSpace(got) != "hello" {
		t.Errorf("web-0 after the rollout: GREETING=%q", got)
	}
	revs := kubectlOK(t, ctx, in, ns, "get", "controllerrevisions")
	if !strings.Contains(revs, "statefulset.apps/web") || strings.Count(revs, "statefulset.apps/web") != 2 {
		t.Errorf("controller revisions:\n%s", revs)
	}
	s, err := in.Client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
	must(t, "reading the statefulset", err)
	if s.Status.CurrentRevision != s.Status.UpdateRevision || s.Status.UpdatedReplicas != 1 || s.Status.ObservedGeneration != s.Generation {
		t.Errorf("status after the rollout: %+v", s.Status)
	}
}

// TestStatefulSetClaims checks a StatefulSet's volumeClaimTemplates: pod db-0 gets claim data-db-0, which
// the local-path provisioner binds, and what db-0 writes there outlives the pod.
func TestStatefulSetClaims(t *testing.T) {
	in, ctx, ns := setup(t)
	grace := int64(1)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{
					Name: "main", Image: simImage, Command: sleeper,
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
				},
			}},
		},
	}
	_, err := in.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	must(t, "creating the statefulset", err)

	kubectlOK(t, ctx, in, ns, "rollout", "status", "statefulset/db", "--timeout=90s")
	pvc, err := in.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
	must(t, "reading claim data-db-0", err)
	if pvc.Labels["app"] != "db" {
		t.Errorf("claim labels: %v", pvc.Labels)
	}
	kubectlOK(t, ctx, in, ns, "exec", "db-0", "--", "sh", "-c", "echo kept > /data/file")
	old, err := in.Client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
	must(t, "reading db-0", err)
	must(t, "deleting db-0", in.Client.CoreV1().Pods(ns).Delete(ctx, "db-0", metav1.DeleteOptions{}))
	eventually(t, ctx, 90*time.Second, "db-0 back and ready", func(ctx context.Context) (bool, error) {
		p, err := in.Client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.UID != old.UID && runningReady(p), nil
	})
	if got := strings.TrimSpace(kubectlOK(t, ctx, in, ns, "exec", "db-0", "--", "cat", "/data/file")); got != "kept" {
		t.Errorf("data after the pod came back: %q", got)
	}
}

func TestDaemonSet(t *testing.T) {
	in, ctx, ns := setup(t)
	grace := int64(1)
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{Name: "main", Image: simImage, Command: sleeper}}},
			},
		},
	}
	_, err := in.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	must(t, "creating the daemonset", err)
	kubectlOK(t, ctx, in, ns, "rollout", "status", "daemonset/agent", "--timeout=60s")
	nodes, err := in.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	must(t, "listing nodes", err)
	pods, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
	must(t, "listing pods", err)
	if len(pods.Items) != len(nodes.Items) {
		t.Errorf("%d pods for %d nodes", len(pods.Items), len(nodes.Items))
	}
	out := kubectlOK(t, ctx, in, ns, "get", "daemonset", "agent")
	n := len(nodes.Items)
	if fields := strings.Fields(out); len(fields) < 17 || strings.Join(fields[9:15], " ") != fmt.Sprintf("agent %d %d %d %d %d", n, n, n, n, n) {
		t.Errorf("kubectl get daemonset:\n%s", out)
	}
	kubectlOK(t, ctx, in, ns, "set", "env", "daemonset/agent", "V=2")
	kubectlOK(t, ctx, in, ns, "rollout", "status", "daemonset/agent", "--timeout=60s")
	eventually(t, ctx, 60*time.Second, "one updated pod per node", func(ctx context.Context) (bool, error) {
		pods, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return false, err
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live++
				if len(p.Spec.Containers[0].Env) == 0 {
					return false, nil
				}
			}
		}
		return live == n, nil
	})
}
