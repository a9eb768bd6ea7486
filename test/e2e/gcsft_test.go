package e2e

// GCS fault tolerance with an external Redis, in KubeRay's external-Redis sample shape: the Redis is the
// nc stand-in of apps_test.go (answering AUTH only for the Secret's password, PING, and the SCAN and DEL
// of Ray's cleanup), behind a Service `redis`; the head is raysim, which will not serve until its Redis
// answers, and the cleanup Job at deletion runs raysim's answer to its `python -c`.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/rayparams"
	raysimgcs "github.com/rayctl/rayctl/pkg/raysim/gcs"
)

// redisPassword is the Secret's password (KubeRay's sample uses this one too).
const redisPassword = "5241590000000000"

// redisCluster is the sample RayCluster with gcsFaultToleranceOptions pointing at addr, the password
// from the Secret redis-password-secret. Its pods ask for no CPU: they run on the shared instance, whose
// node other tests' pods hold.
func redisCluster(t *testing.T, name, addr string) *rayv1.RayCluster {
	c := sampleCluster(t, name)
	c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	for i := range c.Spec.WorkerGroupSpecs {
		c.Spec.WorkerGroupSpecs[i].Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	}
	c.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{
		RedisAddress: addr,
		RedisPassword: &rayv1.RedisCredential{ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "redis-password-secret"}, Key: "password"}}},
	}
	return c
}

// headLog is the Ray container's log of a cluster's head pod.
func (e *rayEnv) headLog(t *testing.T, pod string) string {
	t.Helper()
	out, stderr, err := e.in.Kubectl(e.ctx, "", "-n", e.ns, "logs", pod, "-c", "ray-head")
	must(t, "kubectl logs "+pod+": "+stderr, err)
	return out
}

// TestGCSFaultToleranceRedis: a RayCluster whose head has a Redis (reached by Service name, password
// from a Secret) becomes ready and its head says it reached Redis; one whose Redis does not exist keeps
// its head not Ready, saying why, while the first is ready and for 20 s after. Both carry KubeRay's
// cleanup finalizer. Deleted, the first runs its Redis cleanup Job, which deletes its storage namespace's
// keys (and no other) and succeeds, and then goes; the second's cleanup cannot reach Redis, and its
// finalizer is removed at its ray.io/gcs-ft-deletion-timeout with a Warning, so it goes too.
func TestGCSFaultToleranceRedis(t *testing.T) {
	e := raySetup(t, shared(t))
	in, ctx, ns := e.in, e.ctx, e.ns
	_, err := in.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-password-secret"},
		StringData: map[string]string{"password": redisPassword},
	}, metav1.CreateOptions{})
	must(t, "creating the password Secret", err)
	kubectlOK(t, ctx, in, ns, "create", "deployment", "redis", "--image="+simImage, "--port=6379", "--", "sh", "-c", respServer(redisPassword))
	kubectlOK(t, ctx, in, ns, "expose", "deployment", "redis", "--port=6379")

	e.createCluster(t, redisCluster(t, "ft", "redis:6379"))
	lostCluster := redisCluster(t, "ft-lost", "no-such-redis:6379")
	lostCluster.Annotations = map[string]string{rayparams.AnnotationGCSFTDeletionTimeout: "15"}
	e.createCluster(t, lostCluster)

	_, head, _ := e.waitClusterReady(t, "ft", 1)
	if head.Annotations["ray.io/ft-enabled"] != "true" {
		t.Errorf("head annotations %v: want ray.io/ft-enabled true", head.Annotations)
	}
	if log := e.headLog(t, head.Name); !strings.Contains(log, "GCS uses external Redis at redis:6379") {
		t.Errorf("the head's log does not say it reached Redis:\n%s", log)
	}

	var lost string
	e.waitFor(t, time.Minute, "ft-lost's head running and saying it cannot reach Redis", func(ctx context.Context) (bool, string, error) {
		heads, err := e.clusterPods(ctx, "ft-lost", "head")
		if err != nil || len(heads) != 1 || heads[0].Status.Phase != corev1.PodRunning {
			return false, podsState(heads), err
		}
		lost = heads[0].Name
		out, _, err := in.Kubectl(ctx, "", "-n", ns, "logs", lost, "-c", "ray-head")
		return strings.Contains(out, "cannot reach Redis at no-such-redis:6379"), podsState(heads) + " log: " + out, err
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		pod, err := in.Client.CoreV1().Pods(ns).Get(ctx, lost, metav1.GetOptions{})
		must(t, "reading ft-lost's head", err)
		c, err := e.ray.RayV1().RayClusters(ns).Get(ctx, "ft-lost", metav1.GetOptions{})
		must(t, "reading ft-lost", err)
		if runningReady(pod) || c.Status.State == rayv1.Ready {
			t.Fatalf("a head without its Redis became ready: %s; %s", podsState([]corev1.Pod{*pod}), clusterState(c))
		}
		time.Sleep(time.Second)
	}
	t.Logf("ft-lost's head %s stayed not Ready for 20 s", lost)

	testRedisCleanup(t, e, head)
}

// testRedisCleanup deletes the clusters ft (its head is head) and ft-lost of TestGCSFaultToleranceRedis
// and checks KubeRay's Redis cleanup: ft's Job deletes the keys of ft's storage namespace from the Redis
// stand-in and completes before ft goes; ft-lost goes once its deletion timeout has passed.
func testRedisCleanup(t *testing.T, e *rayEnv, head *corev1.Pod) {
	in, ctx, ns := e.in, e.ctx, e.ns
	storage := head.Annotations[rayparams.AnnotationExternalStorageNS]
	if storage == "" {
		t.Fatalf("ft's head has no %s annotation: %v", rayparams.AnnotationExternalStorageNS, head.Annotations)
	}
	for _, name := range []string{"ft", "ft-lost"} {
		c, err := e.ray.RayV1().RayClusters(ns).Get(ctx, name, metav1.GetOptions{})
		must(t, "reading "+name, err)
		if !slices.Contains(c.Finalizers, rayparams.FinalizerRedisCleanup) {
			t.Errorf("%s's finalizers %v lack %s", name, c.Finalizers, rayparams.FinalizerRedisCleanup)
		}
	}
	// What GCS would have written for ft (raysim keeps its state in memory), and another cluster's key.
	keys := []string{raysimgcs.KeyPrefix(storage) + "NODE", raysimgcs.KeyPrefix(storage) + "KV", raysimgcs.KeyPrefix("other") + "KV"}
	kubectlOK(t, ctx, in, ns, "exec", "deploy/redis", "--", "sh", "-c", `cd /tmp/redis-keys && touch "`+strings.Join(keys, `" "`)+`"`)

	// The Jobs go with their clusters, so their outcome is taken from a watch.
	w, err := in.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	must(t, "watching Jobs", err)
	defer w.Stop()
	var mu sync.Mutex
	outcomes := map[string]string{}
	go func() {
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok {
				mu.Lock()
				if _, seen := outcomes[j.Name]; !seen {
					outcomes[j.Name] = "created"
				}
				for _, c := range j.Status.Conditions {
					if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue && outcomes[j.Name] == "created" {
						outcomes[j.Name] = string(c.Type)
						// Its log, for the report, before the Job goes with its cluster.
						out, stderr, _ := in.Kubectl(ctx, "", "-n", ns, "logs", "job/"+j.Name)
						t.Logf("cleanup Job %s %s; its log:\n%s%s", j.Name, c.Type, out, stderr)
					}
				}
				mu.Unlock()
			}
		}
	}()

	kubectlOK(t, ctx, in, ns, "delete", "raycluster", "ft", "ft-lost", "--wait=false")
	for _, name := range []string{"ft", "ft-lost"} {
		e.waitFor(t, time.Minute, name+" gone", func(ctx context.Context) (bool, string, error) {
			c, err := e.ray.RayV1().RayClusters(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			mu.Lock()
			defer mu.Unlock()
			return false, fmt.Sprintf("finalizers %v, Jobs %v", c.GetFinalizers(), outcomes), err
		})
	}
	mu.Lock()
	if got := outcomes["ft-redis-cleanup"]; got != string(batchv1.JobComplete) {
		t.Errorf("ft's cleanup Job: %q, want Complete (Jobs seen: %v)", got, outcomes)
	}
	if _, ok := outcomes["ft-lost-redis-cleanup"]; !ok {
		t.Errorf("ft-lost got no cleanup Job (Jobs seen: %v)", outcomes)
	}
	mu.Unlock()
	left := kubectlOK(t, ctx, in, ns, "exec", "deploy/redis", "--", "ls", "/tmp/redis-keys")
	if got := strings.Fields(left); !slices.Equal(got, []string{keys[2]}) {
		t.Errorf("Redis keys after ft's cleanup: %v; want only %s (ft's were %v)", got, keys[2], keys[:2])
	}
	events, err := in.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing events", err)
	want := map[string]bool{"ft/" + raycluster.EventCreatedRedisCleanupJob: false, "ft-lost/" + raycluster.EventCreatedRedisCleanupJob: false,
		"ft-lost/" + raycluster.EventForceDeletedStuckCluster: false}
	for _, ev := range events.Items {
		if k := ev.InvolvedObject.Name + "/" + ev.Reason; ev.InvolvedObject.Kind == "RayCluster" {
			if _, ok := want[k]; ok {
				want[k] = true
			}
			if k == "ft/"+raycluster.EventForceDeletedStuckCluster {
				t.Errorf("ft's finalizer was removed by the timeout: %s", ev.Message)
			}
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no event %s", k)
		}
	}
}
