package validation

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/pkg/apiserver/defaults"
)

// rayHeadPod is shaped like the head pod KubeRay creates for a RayCluster.
func rayHeadPod() *corev1.Pod {
	healthCmd := []string{"bash", "-c", "wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success && " +
		"wget -T 2 -q -O- http://localhost:8265/api/gcs_healthz | grep success"}
	fieldRef := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "raycluster-sample-head-x7k2p",
			Namespace: "default",
			Labels: map[string]string{
				"ray.io/cluster": "raycluster-sample", "ray.io/node-type": "head", "ray.io/group": "headgroup",
				"ray.io/is-ray-node": "yes", "app.kubernetes.io/created-by": "kuberay-operator",
			},
			Annotations: map[string]string{"ray.io/ft-enabled": "false"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "raycluster-sample",
				UID: "5f9c7a7e-1c7e-4c1e-9a57-3b8f3c1f0a11", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:    "ray-head",
				Image:   "rayproject/ray:2.46.0",
				Command: []string{"/bin/bash", "-lc", "--"},
				Args:    []string{"ulimit -n 65536; ray start --head --dashboard-host=0.0.0.0 --metrics-export-port=8080 --block"},
				Ports: []corev1.ContainerPort{
					{Name: "gcs-server", ContainerPort: 6379}, {Name: "dashboard", ContainerPort: 8265},
					{Name: "client", ContainerPort: 10001}, {Name: "metrics", ContainerPort: 8080},
				},
				Env: []corev1.EnvVar{
					{Name: "RAY_CLUSTER_NAME", ValueFrom: fieldRef("metadata.labels['ray.io/cluster']")},
					{Name: "RAY_CLOUD_INSTANCE_ID", ValueFrom: fieldRef("metadata.name")},
					{Name: "RAY_NODE_TYPE_NAME", ValueFrom: fieldRef("metadata.labels['ray.io/group']")},
					{Name: "MY_POD_IP", ValueFrom: fieldRef("status.podIP")},
					{Name: "RAY_PORT", Value: "6379"},
					{Name: "RAY_ADDRESS", Value: "127.0.0.1:6379"},
					{Name: "RAY_USAGE_STATS_KUBERAY_IN_USE", Value: "1"},
					{Name: "RAY_USAGE_STATS_EXTRA_TAGS", Value: "kuberay_version=v1.5.0;kuberay_crd=RayCluster"},
					{Name: "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", Value: "1"},
					{Name: "MY_CPU_REQUEST", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu"}}},
				},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
				},
				LivenessProbe: &corev1.Probe{
					ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: healthCmd}},
					InitialDelaySeconds: 30, TimeoutSeconds: 5, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 120,
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: healthCmd}},
					InitialDelaySeconds: 10, TimeoutSeconds: 5, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 10,
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "ray stop"}}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "shared-mem", MountPath: "/dev/shm"},
					{Name: "ray-logs", MountPath: "/tmp/ray"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "shared-mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: ptrTo(resource.MustParse("2Gi"))}}},
				{Name: "ray-logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			RestartPolicy: corev1.RestartPolicyAlways,
		},
	}
}

// rayWorkerPod is shaped like a KubeRay worker pod: an init container
// waiting for the GCS, a sidecar, a service-account token and a config map.
func rayWorkerPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "raycluster-sample-small-group-worker-abcde", Namespace: "ray",
			Labels: map[string]string{"ray.io/cluster": "raycluster-sample", "ray.io/node-type": "worker", "ray.io/group": "small-group"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "wait-gcs-ready", Image: "rayproject/ray:2.46.0", Command: []string{"/bin/bash", "-lc", "--"},
					Args: []string{"until ray health-check --address raycluster-sample-head-svc.ray.svc.cluster.local:6379; do sleep 5; done"},
					Env:  []corev1.EnvVar{{Name: "FQ_RAY_IP", Value: "raycluster-sample-head-svc.ray.svc.cluster.local"}}},
				{Name: "log-shipper", Image: "fluent/fluent-bit@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
					RestartPolicy:  ptrTo(corev1.ContainerRestartPolicyAlways),
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
					Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 2020}},
					VolumeMounts:   []corev1.VolumeMount{{Name: "ray-logs", MountPath: "/tmp/ray", ReadOnly: true}}},
			},
			Containers: []corev1.Container{{
				Name: "ray-worker", Image: "rayproject/ray:2.46.0",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
					"nvidia.com/gpu": resource.MustParse("1"),
				}},
				EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ray-env"}}}},
				StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(52365)}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "ray-logs", MountPath: "/tmp/ray"}, {Name: "token", MountPath: "/var/run/secrets/tokens"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "ray-logs"},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
				}}}},
			},
			Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			Hostname:     "worker-0",
			Subdomain:    "raycluster-sample-headless",
		},
	}
}

func defaulted(p *corev1.Pod) *corev1.Pod {
	defaults.SetPodDefaults(p)
	return p
}

// minimalPod is a defaulted pod with one container and nothing else.
func minimalPod() *corev1.Pod {
	return defaulted(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
	})
}

func minimalService() *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "raycluster-sample-head-svc", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"ray.io/cluster": "raycluster-sample", "ray.io/node-type": "head"},
			Ports: []corev1.ServicePort{
				{Name: "gcs-server", Port: 6379}, {Name: "dashboard", Port: 8265, TargetPort: intstr.FromString("dashboard")},
				{Name: "client", Port: 10001}, {Name: "metrics", Port: 8080, AppProtocol: ptrTo("http")},
			},
		},
	}
	defaults.SetServiceDefaults(svc)
	return svc
}

func minimalJob() *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "rayjob-sample-submitter", Namespace: "default", UID: "11111111-2222-3333-4444-555555555555"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptrTo[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "submitter"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "ray-job-submitter", Image: "rayproject/ray:2.46.0",
						Command: []string{"ray", "job", "submit", "--address", "http://raycluster-sample-head-svc:8265", "--", "python", "-c", "print(1)"}}},
				},
			},
		},
	}
	defaults.SetJobDefaults(job)
	defaults.SetJobSelector(job)
	return job
}

func ptrTo[T any](v T) *T { return &v }
