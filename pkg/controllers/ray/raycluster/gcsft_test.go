package raycluster

import (
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
	corev1 "k8s.io/api/core/v1"
)

// redisCluster is sampleCluster in KubeRay's external-Redis sample shape: a password from a Secret.
func redisCluster() *rayv1.RayCluster {
	c := sampleCluster()
	c.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{
		RedisAddress: "redis:6379",
		RedisPassword: &rayv1.RedisCredential{ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "redis-password-secret"}, Key: "password"}}},
	}
	return c
}

func TestGCSFaultToleranceHead(t *testing.T) {
	c := redisCluster()
	before := c.DeepCopy()
	head := HeadPod(c, BuildOptions{})
	ray := &head.Spec.Containers[0]
	if head.Annotations[rayparams.AnnotationFTEnabled] != "true" || head.Annotations[rayparams.AnnotationExternalStorageNS] != "uid-1" {
		t.Errorf("head annotations %v: want ft-enabled true and the storage namespace the cluster's UID", head.Annotations)
	}
	if e, _ := env(ray, EnvRedisAddress); e.Value != "redis:6379" {
		t.Errorf("%s = %+v", EnvRedisAddress, e)
	}
	if e, _ := env(ray, EnvExternalStorageNS); e.Value != "uid-1" {
		t.Errorf("%s = %+v", EnvExternalStorageNS, e)
	}
	if e, _ := env(ray, EnvRedisPassword); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "redis-password-secret" {
		t.Errorf("%s = %+v: want the Secret reference", EnvRedisPassword, e)
	}
	if _, ok := env(ray, EnvRedisUsername); ok {
		t.Errorf("%s set without redisUsername", EnvRedisUsername)
	}
	if !strings.Contains(ray.Args[0], " --redis-password=$REDIS_PASSWORD ") || strings.Contains(ray.Args[0], "redis-username") {
		t.Errorf("ray start: %s", ray.Args[0])
	}
	if c.Spec.HeadGroupSpec.RayStartParams["redis-password"] != "" || before.Spec.HeadGroupSpec.RayStartParams == nil {
		t.Errorf("HeadPod changed the cluster's rayStartParams: %v", c.Spec.HeadGroupSpec.RayStartParams)
	}

	// A user name and a chosen namespace, both from the options.
	c.Spec.GcsFaultToleranceOptions.RedisUsername = &rayv1.RedisCredential{Value: "ray"}
	c.Spec.GcsFaultToleranceOptions.ExternalStorageNamespace = "shared"
	head = HeadPod(c, BuildOptions{})
	ray = &head.Spec.Containers[0]
	if e, _ := env(ray, EnvRedisUsername); e.Value != "ray" || !strings.Contains(ray.Args[0], " --redis-username=$REDIS_USERNAME ") {
		t.Errorf("user name: env %+v, ray start %s", e, ray.Args[0])
	}
	if e, _ := env(ray, EnvExternalStorageNS); e.Value != "shared" || head.Annotations[rayparams.AnnotationExternalStorageNS] != "shared" {
		t.Errorf("storage namespace: env %+v, annotations %v", e, head.Annotations)
	}

	// Off: the annotation says false and nothing about Redis is added.
	head = HeadPod(sampleCluster(), BuildOptions{})
	if head.Annotations[rayparams.AnnotationFTEnabled] != "false" {
		t.Errorf("ft-enabled %q without fault tolerance", head.Annotations[rayparams.AnnotationFTEnabled])
	}
	for _, name := range []string{EnvRedisAddress, EnvRedisPassword, EnvExternalStorageNS} {
		if _, ok := env(&head.Spec.Containers[0], name); ok {
			t.Errorf("%s set without fault tolerance", name)
		}
	}
}

func TestGCSFaultToleranceAnnotationStyle(t *testing.T) {
	c := sampleCluster()
	c.Annotations = map[string]string{rayparams.AnnotationFTEnabled: "true", rayparams.AnnotationExternalStorageNS: "old-ns"}
	c.Spec.HeadGroupSpec.RayStartParams["redis-password"] = "secret"
	c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: EnvRedisAddress, Value: "redis:6379"}}
	if err := validateCluster(c); err != nil {
		t.Fatalf("the annotation's way is valid: %v", err)
	}
	head := HeadPod(c, BuildOptions{})
	ray := &head.Spec.Containers[0]
	if e, _ := env(ray, EnvRedisPassword); e.Value != "secret" {
		t.Errorf("%s = %+v: want the rayStartParams password", EnvRedisPassword, e)
	}
	if e, _ := env(ray, EnvExternalStorageNS); e.Value != "old-ns" || head.Annotations[rayparams.AnnotationFTEnabled] != "true" {
		t.Errorf("storage namespace %+v, annotations %v", e, head.Annotations)
	}
}

func TestGCSFaultToleranceWorker(t *testing.T) {
	c := redisCluster()
	w := WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{})
	ray := &w.Spec.Containers[0]
	if e, _ := env(ray, EnvGCSReconnectTimeout); e.Value != "600" {
		t.Errorf("%s = %+v, want 600", EnvGCSReconnectTimeout, e)
	}
	for _, name := range []string{EnvRedisAddress, EnvRedisPassword, EnvExternalStorageNS} {
		if _, ok := env(ray, name); ok {
			t.Errorf("a worker got %s", name)
		}
	}
	if _, ok := w.Annotations[rayparams.AnnotationFTEnabled]; ok {
		t.Errorf("a worker got %s", rayparams.AnnotationFTEnabled)
	}
	c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: EnvGCSReconnectTimeout, Value: "30"}}
	w = WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{})
	if e, _ := env(&w.Spec.Containers[0], EnvGCSReconnectTimeout); e.Value != "30" {
		t.Errorf("the template's own timeout was replaced: %+v", e)
	}
	w = WorkerPod(sampleCluster(), &c.Spec.WorkerGroupSpecs[0], BuildOptions{})
	if e, _ := env(&w.Spec.Containers[0], EnvGCSReconnectTimeout); e.Value != "30" {
		t.Errorf("without fault tolerance: %+v", e)
	}
}

func TestGCSFaultToleranceValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(c *rayv1.RayCluster)
		want   string // "" = valid
	}{
		"options":                      {func(*rayv1.RayCluster) {}, ""},
		"options and annotation":       {func(c *rayv1.RayCluster) { c.Annotations = map[string]string{rayparams.AnnotationFTEnabled: "true"} }, "both set"},
		"options and annotation false": {func(c *rayv1.RayCluster) { c.Annotations = map[string]string{rayparams.AnnotationFTEnabled: "false"} }, "both set"},
		"options and storage annotation": {func(c *rayv1.RayCluster) {
			c.Annotations = map[string]string{rayparams.AnnotationExternalStorageNS: "x"}
		}, "externalStorageNamespace"},
		"options and param password":  {func(c *rayv1.RayCluster) { c.Spec.HeadGroupSpec.RayStartParams["redis-password"] = "x" }, "redisPassword"},
		"options and env password":    {func(c *rayv1.RayCluster) { headEnv(c, EnvRedisPassword) }, "redisPassword"},
		"options and env address":     {func(c *rayv1.RayCluster) { headEnv(c, EnvRedisAddress) }, "redisAddress"},
		"param user name":             {func(c *rayv1.RayCluster) { c.Spec.HeadGroupSpec.RayStartParams["redis-username"] = "x" }, "redisUsername"},
		"env user name":               {func(c *rayv1.RayCluster) { headEnv(c, EnvRedisUsername) }, "redisUsername"},
		"env address without options": {func(c *rayv1.RayCluster) { c.Spec.GcsFaultToleranceOptions = nil; headEnv(c, EnvRedisAddress) }, "gcsFaultToleranceOptions is not"},
		"env address with annotation only": {func(c *rayv1.RayCluster) {
			c.Spec.GcsFaultToleranceOptions = nil
			c.Annotations = map[string]string{rayparams.AnnotationFTEnabled: "true"}
			headEnv(c, EnvRedisAddress)
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := redisCluster()
			tc.change(c)
			err := validateCluster(c)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func headEnv(c *rayv1.RayCluster, name string) {
	ray := &c.Spec.HeadGroupSpec.Template.Spec.Containers[0]
	ray.Env = append(ray.Env, corev1.EnvVar{Name: name, Value: "x"})
}

// TestRedisCleanupJob: the Job KubeRay runs at deletion carries the head's Ray container with its Redis
// environment, Ray's cleanup function as its command, no probes and no retries, and c as its owner.
func TestRedisCleanupJob(t *testing.T) {
	c := redisCluster()
	job := RedisCleanupJob(c, BuildOptions{})
	if job.Name != "demo-redis-cleanup" || job.Labels[rayparams.LabelNodeType] != "redis-cleanup" || job.Labels[rayparams.LabelCluster] != c.Name ||
		job.Spec.Template.Labels[rayparams.LabelNodeType] != "redis-cleanup" || job.Labels[rayparams.LabelCreatedBy] != rayparams.CreatedBy {
		t.Errorf("name %s, labels %v, template labels %v", job.Name, job.Labels, job.Spec.Template.Labels)
	}
	if len(job.OwnerReferences) != 1 || job.OwnerReferences[0].Kind != "RayCluster" || job.OwnerReferences[0].UID != c.UID {
		t.Errorf("owners %+v", job.OwnerReferences)
	}
	if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 300 || job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("backoffLimit %d, activeDeadlineSeconds %d, restartPolicy %s", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds, job.Spec.Template.Spec.RestartPolicy)
	}
	spec := job.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want the Ray container alone", len(spec.Containers))
	}
	ray := &spec.Containers[0]
	if ray.Image != c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image || ray.LivenessProbe != nil || ray.ReadinessProbe != nil {
		t.Errorf("image %s, probes %v %v", ray.Image, ray.LivenessProbe, ray.ReadinessProbe)
	}
	if strings.Join(ray.Command, " ") != "/bin/bash -c --" || len(ray.Args) != 1 ||
		!strings.Contains(ray.Args[0], "python -c \"") || !strings.Contains(ray.Args[0], "cleanup_redis_storage(") || strings.Contains(ray.Args[0], "username=") {
		t.Errorf("command %v args %q", ray.Command, ray.Args)
	}
	for name, want := range map[string]string{EnvRedisAddress: "redis:6379", EnvExternalStorageNS: "uid-1",
		"RAY_redis_db_connect_retries": "120", "RAY_redis_db_connect_wait_milliseconds": "500"} {
		if e, _ := env(ray, name); e.Value != want {
			t.Errorf("%s = %+v, want %q", name, e, want)
		}
	}
	if e, _ := env(ray, EnvRedisPassword); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Errorf("%s = %+v: want the Secret reference", EnvRedisPassword, e)
	}
	if cpu := ray.Resources.Limits[corev1.ResourceCPU]; cpu.String() != "200m" {
		t.Errorf("resources %v", ray.Resources)
	}

	c.Spec.GcsFaultToleranceOptions.RedisUsername = &rayv1.RedisCredential{Value: "ray"}
	if args := RedisCleanupJob(c, BuildOptions{}).Spec.Template.Spec.Containers[0].Args[0]; !strings.Contains(args, "username=os.environ.get('REDIS_USERNAME'") {
		t.Errorf("with a user name: %q", args)
	}
}
