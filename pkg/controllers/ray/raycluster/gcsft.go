package raycluster

import (
	"errors"
	"strconv"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
	corev1 "k8s.io/api/core/v1"
)

// GCS fault tolerance: what KubeRay puts on the Pods of a cluster whose GCS keeps its state in an external
// Redis (spec.gcsFaultToleranceOptions, or the older ray.io/ft-enabled annotation on the RayCluster).
const (
	// EnvRedisAddress is the Redis the head's GCS uses (host:port, optionally redis://).
	EnvRedisAddress = "RAY_REDIS_ADDRESS"
	// EnvRedisPassword and EnvRedisUsername are the head's Redis credentials.
	EnvRedisPassword = "REDIS_PASSWORD"
	// EnvRedisUsername is the head's Redis user name.
	EnvRedisUsername = "REDIS_USERNAME"
	// EnvExternalStorageNS is the head's storage namespace in Redis.
	EnvExternalStorageNS = "RAY_external_storage_namespace"
	// EnvGCSReconnectTimeout is how long a worker waits for its GCS to come back.
	EnvGCSReconnectTimeout = "RAY_gcs_rpc_server_reconnect_timeout_s"

	// workerGCSReconnectTimeout is KubeRay's value for workers of a fault-tolerant cluster (Ray's
	// default is 60 s; a restarted head with its Redis state typically takes longer to come back).
	workerGCSReconnectTimeout = "600"
)

// GCSFaultToleranceEnabled says whether c's head keeps its GCS state in Redis: gcsFaultToleranceOptions
// is set, or the RayCluster's ray.io/ft-enabled annotation is "true".
func GCSFaultToleranceEnabled(c *rayv1.RayCluster) bool {
	return c.Spec.GcsFaultToleranceOptions != nil || strings.EqualFold(c.Annotations[rayparams.AnnotationFTEnabled], "true")
}

// validateGCSFaultTolerance rejects what KubeRay rejects: both ways of turning fault tolerance on, a
// Redis set through the Pod's environment without turning it on, and with gcsFaultToleranceOptions, any
// Redis setting made elsewhere than in the options.
func validateGCSFaultTolerance(c *rayv1.RayCluster) error {
	opts := c.Spec.GcsFaultToleranceOptions
	head := c.Spec.HeadGroupSpec
	env := head.Template.Spec.Containers[0].Env
	if c.Annotations[rayparams.AnnotationFTEnabled] != "" && opts != nil {
		return errors.New("the " + rayparams.AnnotationFTEnabled + " annotation and gcsFaultToleranceOptions are both set; use only gcsFaultToleranceOptions")
	}
	if !GCSFaultToleranceEnabled(c) && hasEnv(env, EnvRedisAddress) {
		return errors.New(EnvRedisAddress + " is set in the head's environment but gcsFaultToleranceOptions is not; set gcsFaultToleranceOptions.redisAddress instead")
	}
	if opts != nil {
		switch {
		case head.RayStartParams["redis-password"] != "":
			return errors.New("rayStartParams redis-password cannot be set with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.redisPassword")
		case hasEnv(env, EnvRedisPassword):
			return errors.New(EnvRedisPassword + " cannot be set in the head's environment with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.redisPassword")
		case hasEnv(env, EnvRedisAddress):
			return errors.New(EnvRedisAddress + " cannot be set in the head's environment with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.redisAddress")
		case c.Annotations[rayparams.AnnotationExternalStorageNS] != "":
			return errors.New("the " + rayparams.AnnotationExternalStorageNS + " annotation cannot be set with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.externalStorageNamespace")
		}
	}
	if head.RayStartParams["redis-username"] != "" || hasEnv(env, EnvRedisUsername) {
		return errors.New("a Redis user name cannot be set in rayStartParams or the head's environment; use gcsFaultToleranceOptions.redisUsername")
	}
	return nil
}

// configureHeadGCSFaultTolerance records on the head's template whether fault tolerance is on and, if
// it is, gives the Ray container its Redis: the storage namespace (options, else the RayCluster's
// annotation, else its UID) as annotation and environment, and the options' address and credentials as
// environment that the generated `ray start` refers to.
func configureHeadGCSFaultTolerance(c *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec, params map[string]string) {
	on := GCSFaultToleranceEnabled(c)
	tmpl.Annotations[rayparams.AnnotationFTEnabled] = strconv.FormatBool(on)
	if !on {
		return
	}
	ray := &tmpl.Spec.Containers[0]
	opts := c.Spec.GcsFaultToleranceOptions
	ns := string(c.UID)
	if v, ok := c.Annotations[rayparams.AnnotationExternalStorageNS]; ok {
		ns = v
	}
	if opts != nil && opts.ExternalStorageNamespace != "" {
		ns = opts.ExternalStorageNamespace
	}
	tmpl.Annotations[rayparams.AnnotationExternalStorageNS] = ns
	if !hasEnv(ray.Env, EnvExternalStorageNS) {
		ray.Env = append(ray.Env, corev1.EnvVar{Name: EnvExternalStorageNS, Value: ns})
	}
	if opts == nil {
		// The annotation's way: a password written in rayStartParams is passed on as REDIS_PASSWORD too.
		if v, ok := params["redis-password"]; ok && !hasEnv(ray.Env, EnvRedisPassword) {
			ray.Env = append(ray.Env, corev1.EnvVar{Name: EnvRedisPassword, Value: v})
		}
		return
	}
	ray.Env = append(ray.Env, corev1.EnvVar{Name: EnvRedisAddress, Value: opts.RedisAddress})
	for _, cred := range []struct {
		param, env string
		from       *rayv1.RedisCredential
	}{{"redis-username", EnvRedisUsername, opts.RedisUsername}, {"redis-password", EnvRedisPassword, opts.RedisPassword}} {
		if cred.from == nil {
			continue
		}
		params[cred.param] = "$" + cred.env
		ray.Env = append(ray.Env, corev1.EnvVar{Name: cred.env, Value: cred.from.Value, ValueFrom: cred.from.ValueFrom.DeepCopy()})
	}
}

// configureWorkerGCSFaultTolerance lets a worker of a fault-tolerant cluster wait longer for its GCS
// (KubeRay's 600 s), unless the template says otherwise.
func configureWorkerGCSFaultTolerance(c *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec) {
	ray := &tmpl.Spec.Containers[0]
	if GCSFaultToleranceEnabled(c) && !hasEnv(ray.Env, EnvGCSReconnectTimeout) {
		ray.Env = append(ray.Env, corev1.EnvVar{Name: EnvGCSReconnectTimeout, Value: workerGCSReconnectTimeout})
	}
}
