package e2e

// GCS fault tolerance with an external Redis, in KubeRay's external-Redis sample shape: the Redis is the
// nc stand-in of apps_test.go (answering AUTH only for the Secret's password, and PING), behind a
// Service `redis`; the head is raysim, which will not serve until its Redis answers.

import (
	"context"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// its head not Ready, saying why, while the first is ready and for 20 s after.
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
	e.createCluster(t, redisCluster(t, "ft-lost", "no-such-redis:6379"))

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
}
