package validation

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rayctl/rayctl/pkg/apiserver/defaults"
)

// pod returns the validation errors of a minimal defaulted pod after mut.
func pod(mut func(p *corev1.Pod)) func() field.ErrorList {
	return func() field.ErrorList {
		p := minimalPod()
		mut(p)
		return ValidatePod(p)
	}
}

func ctr(p *corev1.Pod) *corev1.Container { return &p.Spec.Containers[0] }

func svc(mut func(s *corev1.Service)) func() field.ErrorList {
	return func() field.ErrorList {
		s := minimalService()
		mut(s)
		return ValidateService(s)
	}
}

func job(mut func(j *batchv1.Job)) func() field.ErrorList {
	return func() field.ErrorList {
		j := minimalJob()
		mut(j)
		return ValidateJob(j)
	}
}

func emptyDir() corev1.VolumeSource {
	return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
}

func rb(kind string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rb", Namespace: "default"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: "ray-operator"},
		Subjects:   subjects,
	}
}

func newEvent() *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "x.17a", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "x"},
		Reason:         "Started", Message: "Started container c", Type: corev1.EventTypeNormal,
	}
}

func newEventsV1() *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "x.17b", Namespace: "default"},
		EventTime:  metav1.NowMicro(), ReportingController: "rayctl.io/kubelet", ReportingInstance: "node-1",
		Action: "Pulling", Reason: "Pulling", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "x"},
	}
}

func TestValidateRejects(t *testing.T) {
	bigData := strings.Repeat("x", 1<<20)
	cases := []struct {
		name  string
		errs  func() field.ErrorList
		field string
		typ   field.ErrorType
	}{
		// Pods: metadata.
		{"pod name not a subdomain", pod(func(p *corev1.Pod) { p.Name = "Bad_Name" }), "metadata.name", field.ErrorTypeInvalid},
		{"pod without namespace", pod(func(p *corev1.Pod) { p.Namespace = "" }), "metadata.namespace", field.ErrorTypeRequired},
		{"pod label value", pod(func(p *corev1.Pod) { p.Labels = map[string]string{"a": "-bad-"} }), "metadata.labels", field.ErrorTypeInvalid},
		// Pods: containers.
		{"no containers", pod(func(p *corev1.Pod) { p.Spec.Containers = nil }), "spec.containers", field.ErrorTypeRequired},
		{"container name", pod(func(p *corev1.Pod) { ctr(p).Name = "Ray_Head" }), "spec.containers[0].name", field.ErrorTypeInvalid},
		{"container name empty", pod(func(p *corev1.Pod) { ctr(p).Name = "" }), "spec.containers[0].name", field.ErrorTypeRequired},
		{"container name clashes with init container", pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{*ctr(p).DeepCopy()}
		}), "spec.containers[0].name", field.ErrorTypeDuplicate},
		{"duplicate container names", pod(func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, *ctr(p).DeepCopy())
		}), "spec.containers[1].name", field.ErrorTypeDuplicate},
		{"image required", pod(func(p *corev1.Pod) { ctr(p).Image = "" }), "spec.containers[0].image", field.ErrorTypeRequired},
		{"init image required", pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", TerminationMessagePolicy: "File", ImagePullPolicy: "Always"}}
		}), "spec.initContainers[0].image", field.ErrorTypeRequired},
		{"image whitespace", pod(func(p *corev1.Pod) { ctr(p).Image = " busybox" }), "spec.containers[0].image", field.ErrorTypeInvalid},
		{"imagePullPolicy", pod(func(p *corev1.Pod) { ctr(p).ImagePullPolicy = "Sometimes" }), "spec.containers[0].imagePullPolicy", field.ErrorTypeNotSupported},
		{"terminationMessagePolicy", pod(func(p *corev1.Pod) { ctr(p).TerminationMessagePolicy = "" }), "spec.containers[0].terminationMessagePolicy", field.ErrorTypeRequired},
		{"restartPolicy on regular container", pod(func(p *corev1.Pod) {
			ctr(p).RestartPolicy = ptrTo(corev1.ContainerRestartPolicyAlways)
		}), "spec.containers[0].restartPolicy", field.ErrorTypeForbidden},
		// Ports.
		{"containerPort missing", pod(func(p *corev1.Pod) { ctr(p).Ports = []corev1.ContainerPort{{Protocol: "TCP"}} }),
			"spec.containers[0].ports[0].containerPort", field.ErrorTypeRequired},
		{"containerPort too big", pod(func(p *corev1.Pod) { ctr(p).Ports = []corev1.ContainerPort{{ContainerPort: 70000, Protocol: "TCP"}} }),
			"spec.containers[0].ports[0].containerPort", field.ErrorTypeInvalid},
		{"port protocol", pod(func(p *corev1.Pod) { ctr(p).Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: "HTTP"}} }),
			"spec.containers[0].ports[0].protocol", field.ErrorTypeNotSupported},
		{"port protocol missing", pod(func(p *corev1.Pod) { ctr(p).Ports = []corev1.ContainerPort{{ContainerPort: 80}} }),
			"spec.containers[0].ports[0].protocol", field.ErrorTypeRequired},
		{"port name", pod(func(p *corev1.Pod) {
			ctr(p).Ports = []corev1.ContainerPort{{Name: "gcs_server", ContainerPort: 6379, Protocol: "TCP"}}
		}), "spec.containers[0].ports[0].name", field.ErrorTypeInvalid},
		{"port name too long", pod(func(p *corev1.Pod) {
			ctr(p).Ports = []corev1.ContainerPort{{Name: "dashboard-agent-grpc", ContainerPort: 6379, Protocol: "TCP"}}
		}), "spec.containers[0].ports[0].name", field.ErrorTypeInvalid},
		{"duplicate port name", pod(func(p *corev1.Pod) {
			ctr(p).Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: "TCP"}, {Name: "http", ContainerPort: 81, Protocol: "TCP"}}
		}), "spec.containers[0].ports[1].name", field.ErrorTypeDuplicate},
		// Env.
		{"env name empty", pod(func(p *corev1.Pod) { ctr(p).Env = []corev1.EnvVar{{Value: "x"}} }), "spec.containers[0].env[0].name", field.ErrorTypeRequired},
		{"env name with =", pod(func(p *corev1.Pod) { ctr(p).Env = []corev1.EnvVar{{Name: "A=B"}} }), "spec.containers[0].env[0].name", field.ErrorTypeInvalid},
		{"valueFrom without source", pod(func(p *corev1.Pod) {
			ctr(p).Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{}}}
		}), "spec.containers[0].env[0].valueFrom", field.ErrorTypeInvalid},
		{"valueFrom with two sources", pod(func(p *corev1.Pod) {
			ctr(p).Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
				FieldRef:     &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
		}), "spec.containers[0].env[0].valueFrom", field.ErrorTypeInvalid},
		{"value and valueFrom", pod(func(p *corev1.Pod) {
			ctr(p).Env = []corev1.EnvVar{{Name: "A", Value: "x", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}
		}), "spec.containers[0].env[0].valueFrom", field.ErrorTypeInvalid},
		{"fieldRef path", pod(func(p *corev1.Pod) {
			ctr(p).Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.containers"}}}}
		}), "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", field.ErrorTypeNotSupported},
		{"fieldRef apiVersion", pod(func(p *corev1.Pod) {
			ctr(p).Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}), "spec.containers[0].env[0].valueFrom.fieldRef.apiVersion", field.ErrorTypeRequired},
		{"configMapKeyRef key", pod(func(p *corev1.Pod) {
			ctr(p).Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}
		}), "spec.containers[0].env[0].valueFrom.configMapKeyRef.key", field.ErrorTypeRequired},
		{"resourceFieldRef resource", pod(func(p *corev1.Pod) {
			ctr(p).Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
				ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.gpu"}}}}
		}), "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource", field.ErrorTypeNotSupported},
		{"envFrom without source", pod(func(p *corev1.Pod) { ctr(p).EnvFrom = []corev1.EnvFromSource{{Prefix: "RAY_"}} }),
			"spec.containers[0].envFrom[0]", field.ErrorTypeInvalid},
		// Volumes and mounts.
		{"volume name", pod(func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "Shared_Mem", VolumeSource: emptyDir()}} }),
			"spec.volumes[0].name", field.ErrorTypeInvalid},
		{"duplicate volume", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: emptyDir()}, {Name: "v", VolumeSource: emptyDir()}}
		}), "spec.volumes[1].name", field.ErrorTypeDuplicate},
		{"volume without source", pod(func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "v"}} }), "spec.volumes[0]", field.ErrorTypeRequired},
		{"volume with two sources", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{}, HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}}}}
		}), "spec.volumes[0].emptyDir", field.ErrorTypeForbidden},
		{"emptyDir medium", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "Disk"}}}}
		}), "spec.volumes[0].emptyDir.medium", field.ErrorTypeNotSupported},
		{"configMap defaultMode", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, DefaultMode: ptrTo[int32](01000)}}}}
		}), "spec.volumes[0].configMap.defaultMode", field.ErrorTypeInvalid},
		{"secret volume name", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}}}
		}), "spec.volumes[0].secret.secretName", field.ErrorTypeRequired},
		{"configMap item path escapes", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{{Key: "k", Path: "../etc"}}}}}}
		}), "spec.volumes[0].configMap.items[0].path", field.ErrorTypeInvalid},
		{"hostPath path", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}}}
		}), "spec.volumes[0].hostPath.path", field.ErrorTypeRequired},
		{"mount of unknown volume", pod(func(p *corev1.Pod) { ctr(p).VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}} }),
			"spec.containers[0].volumeMounts[0].name", field.ErrorTypeNotFound},
		{"mountPath required", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: emptyDir()}}
			ctr(p).VolumeMounts = []corev1.VolumeMount{{Name: "v"}}
		}), "spec.containers[0].volumeMounts[0].mountPath", field.ErrorTypeRequired},
		{"mountPath unique", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: emptyDir()}, {Name: "w", VolumeSource: emptyDir()}}
			ctr(p).VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/dev/shm"}, {Name: "w", MountPath: "/dev/shm"}}
		}), "spec.containers[0].volumeMounts[1].mountPath", field.ErrorTypeInvalid},
		// Pod-level fields.
		{"restartPolicy", pod(func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }), "spec.restartPolicy", field.ErrorTypeNotSupported},
		{"restartPolicy missing", pod(func(p *corev1.Pod) { p.Spec.RestartPolicy = "" }), "spec.restartPolicy", field.ErrorTypeRequired},
		{"dnsPolicy", pod(func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" }), "spec.dnsPolicy", field.ErrorTypeNotSupported},
		{"dnsPolicy None without config", pod(func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }), "spec.dnsConfig", field.ErrorTypeRequired},
		{"terminationGracePeriodSeconds", pod(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptrTo[int64](-1) }),
			"spec.terminationGracePeriodSeconds", field.ErrorTypeInvalid},
		{"activeDeadlineSeconds", pod(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo[int64](0) }), "spec.activeDeadlineSeconds", field.ErrorTypeInvalid},
		{"hostname", pod(func(p *corev1.Pod) { p.Spec.Hostname = "head.0" }), "spec.hostname", field.ErrorTypeInvalid},
		{"subdomain", pod(func(p *corev1.Pod) { p.Spec.Subdomain = "Headless" }), "spec.subdomain", field.ErrorTypeInvalid},
		{"nodeSelector", pod(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"bad key": "x"} }), "spec.nodeSelector", field.ErrorTypeInvalid},
		{"serviceAccountName", pod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "Ray_SA" }), "spec.serviceAccountName", field.ErrorTypeInvalid},
		{"toleration Exists with value", pod(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Value: "yes"}}
		}), "spec.tolerations[0].value", field.ErrorTypeInvalid},
		// Resources.
		{"requests above limits", pod(func(p *corev1.Pod) {
			ctr(p).Resources = corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"cpu": resource.MustParse("1")}, Requests: corev1.ResourceList{"cpu": resource.MustParse("2")}}
		}), "spec.containers[0].resources.requests[cpu]", field.ErrorTypeInvalid},
		{"negative limit", pod(func(p *corev1.Pod) {
			ctr(p).Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": resource.MustParse("-1Gi")}}
		}), "spec.containers[0].resources.limits[memory]", field.ErrorTypeInvalid},
		{"non-standard resource", pod(func(p *corev1.Pod) {
			ctr(p).Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"gpu": resource.MustParse("1")}}
		}), "spec.containers[0].resources.requests[gpu]", field.ErrorTypeInvalid},
		{"extended resource overcommitted", pod(func(p *corev1.Pod) {
			ctr(p).Resources = corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}, Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
		}), "spec.containers[0].resources.requests[nvidia.com/gpu]", field.ErrorTypeInvalid},
		// Probes.
		{"probe without handler", pod(func(p *corev1.Pod) { ctr(p).LivenessProbe = &corev1.Probe{SuccessThreshold: 1} }),
			"spec.containers[0].livenessProbe", field.ErrorTypeRequired},
		{"probe with two handlers", pod(func(p *corev1.Pod) {
			ctr(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"true"}}, TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		}), "spec.containers[0].readinessProbe.tcpSocket", field.ErrorTypeForbidden},
		{"liveness successThreshold", pod(func(p *corev1.Pod) {
			ctr(p).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
		}), "spec.containers[0].livenessProbe.successThreshold", field.ErrorTypeInvalid},
		{"startup successThreshold", pod(func(p *corev1.Pod) {
			ctr(p).StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 3}
		}), "spec.containers[0].startupProbe.successThreshold", field.ErrorTypeInvalid},
		{"negative periodSeconds", pod(func(p *corev1.Pod) {
			ctr(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: -5}
		}), "spec.containers[0].readinessProbe.periodSeconds", field.ErrorTypeInvalid},
		{"negative failureThreshold", pod(func(p *corev1.Pod) {
			ctr(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, FailureThreshold: -1}
		}), "spec.containers[0].readinessProbe.failureThreshold", field.ErrorTypeInvalid},
		{"httpGet port", pod(func(p *corev1.Pod) {
			ctr(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(0), Scheme: "HTTP"}}}
		}), "spec.containers[0].readinessProbe.httpGet.port", field.ErrorTypeInvalid},
		{"httpGet scheme", pod(func(p *corev1.Pod) {
			ctr(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8265), Scheme: "FTP"}}}
		}), "spec.containers[0].readinessProbe.httpGet.scheme", field.ErrorTypeNotSupported},
		{"exec without command", pod(func(p *corev1.Pod) {
			ctr(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}}
		}), "spec.containers[0].readinessProbe.exec.command", field.ErrorTypeRequired},
		{"readiness probe grace period", pod(func(p *corev1.Pod) {
			ctr(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
				TerminationGracePeriodSeconds: ptrTo[int64](5)}
		}), "spec.containers[0].readinessProbe.terminationGracePeriodSeconds", field.ErrorTypeInvalid},
		{"probe on plain init container", pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", ImagePullPolicy: "Always", TerminationMessagePolicy: "File",
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 1}}}
		}), "spec.initContainers[0].livenessProbe", field.ErrorTypeForbidden},
		{"preStop without handler", pod(func(p *corev1.Pod) { ctr(p).Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{}} }),
			"spec.containers[0].lifecycle.preStop", field.ErrorTypeRequired},

		// Services.
		{"service name not DNS-1035", svc(func(s *corev1.Service) { s.Name = "1head" }), "metadata.name", field.ErrorTypeInvalid},
		{"service without ports", svc(func(s *corev1.Service) { s.Spec.Ports = nil }), "spec.ports", field.ErrorTypeRequired},
		{"service port 0", svc(func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }), "spec.ports[0].port", field.ErrorTypeInvalid},
		{"service duplicate port", svc(func(s *corev1.Service) { s.Spec.Ports[1].Port = 6379 }), "spec.ports[1]", field.ErrorTypeDuplicate},
		{"service port name required", svc(func(s *corev1.Service) { s.Spec.Ports[1].Name = "" }), "spec.ports[1].name", field.ErrorTypeRequired},
		{"service duplicate port name", svc(func(s *corev1.Service) { s.Spec.Ports[1].Name = "gcs-server" }), "spec.ports[1].name", field.ErrorTypeDuplicate},
		{"service port name", svc(func(s *corev1.Service) { s.Spec.Ports[0].Name = "GCS" }), "spec.ports[0].name", field.ErrorTypeInvalid},
		{"service protocol", svc(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" }), "spec.ports[0].protocol", field.ErrorTypeNotSupported},
		{"service protocol missing", svc(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "" }), "spec.ports[0].protocol", field.ErrorTypeRequired},
		{"targetPort number", svc(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(65536) }), "spec.ports[0].targetPort", field.ErrorTypeInvalid},
		{"targetPort name", svc(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("gcs_server") }), "spec.ports[0].targetPort", field.ErrorTypeInvalid},
		{"nodePort on ClusterIP", svc(func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30001 }), "spec.ports[0].nodePort", field.ErrorTypeForbidden},
		{"service type", svc(func(s *corev1.Service) { s.Spec.Type = "Internal" }), "spec.type", field.ErrorTypeNotSupported},
		{"service selector", svc(func(s *corev1.Service) { s.Spec.Selector = map[string]string{"ray.io/cluster": "bad value"} }), "spec.selector", field.ErrorTypeInvalid},
		{"sessionAffinity", svc(func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" }), "spec.sessionAffinity", field.ErrorTypeNotSupported},
		{"clusterIP", svc(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0"; s.Spec.ClusterIPs = []string{"10.96.0"} }), "spec.clusterIP", field.ErrorTypeInvalid},
		{"clusterIPs mismatch", svc(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.10"; s.Spec.ClusterIPs = []string{"10.96.0.11"} }),
			"spec.clusterIPs", field.ErrorTypeInvalid},
		{"headless NodePort", svc(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}), "spec.clusterIP", field.ErrorTypeInvalid},
		{"externalName required", svc(func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, SessionAffinity: "None"}
		}), "spec.externalName", field.ErrorTypeRequired},
		{"externalTrafficPolicy on ClusterIP", svc(func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "Local" }),
			"spec.externalTrafficPolicy", field.ErrorTypeInvalid},

		// Jobs.
		{"job restartPolicy Always", job(func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }),
			"spec.template.spec.restartPolicy", field.ErrorTypeNotSupported},
		{"job selector not matching", job(func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptrTo(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
		}), "spec.template.metadata.labels", field.ErrorTypeInvalid},
		{"job selector missing", job(func(j *batchv1.Job) { j.Spec.ManualSelector = ptrTo(true); j.Spec.Selector = nil }), "spec.selector", field.ErrorTypeRequired},
		{"job selector not generated", job(func(j *batchv1.Job) {
			j.Spec.Selector.MatchLabels = map[string]string{"app": "submitter"}
		}), "spec.selector", field.ErrorTypeInvalid},
		{"job parallelism", job(func(j *batchv1.Job) { j.Spec.Parallelism = ptrTo[int32](-1) }), "spec.parallelism", field.ErrorTypeInvalid},
		{"job completions", job(func(j *batchv1.Job) { j.Spec.Completions = ptrTo[int32](-1) }), "spec.completions", field.ErrorTypeInvalid},
		{"job backoffLimit", job(func(j *batchv1.Job) { j.Spec.BackoffLimit = ptrTo[int32](-1) }), "spec.backoffLimit", field.ErrorTypeInvalid},
		{"job activeDeadlineSeconds", job(func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptrTo[int64](0) }), "spec.activeDeadlineSeconds", field.ErrorTypeInvalid},
		{"job ttlSecondsAfterFinished", job(func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptrTo[int32](-1) }),
			"spec.ttlSecondsAfterFinished", field.ErrorTypeInvalid},
		{"job indexed without completions", job(func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
			j.Spec.Completions = nil
		}), "spec.completions", field.ErrorTypeRequired},
		{"job template image", job(func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "" }),
			"spec.template.spec.containers[0].image", field.ErrorTypeRequired},
		{"job name too long for its label", job(func(j *batchv1.Job) {
			j.Name = strings.Repeat("a", 70)
			j.Spec.Template.Labels[batchv1.JobNameLabel] = j.Name
		}), "spec.template.metadata.labels", field.ErrorTypeInvalid},

		// Namespaces, config maps, secrets, service accounts.
		{"namespace name", func() field.ErrorList {
			return ValidateNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "Ray.System"}})
		}, "metadata.name", field.ErrorTypeInvalid},
		{"namespace inside a namespace", func() field.ErrorList {
			return ValidateNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ray", Namespace: "default"}})
		}, "metadata.namespace", field.ErrorTypeForbidden},
		{"config map key", func() field.ErrorList {
			return ValidateConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}, Data: map[string]string{"ray config": "x"}})
		}, "data[ray config]", field.ErrorTypeInvalid},
		{"config map key in both", func() field.ErrorList {
			return ValidateConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"},
				Data: map[string]string{"k": "x"}, BinaryData: map[string][]byte{"k": nil}})
		}, "data[k]", field.ErrorTypeInvalid},
		{"config map too big", func() field.ErrorList {
			return ValidateConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"},
				Data: map[string]string{"a": bigData, "b": "x"}})
		}, "[]", field.ErrorTypeTooLong},
		{"secret key", func() field.ErrorList {
			return ValidateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{"a/b": nil}})
		}, "data[a/b]", field.ErrorTypeInvalid},
		{"tls secret without cert", func() field.ErrorList {
			return ValidateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{"tls.key": []byte("k")}})
		}, "data[tls.crt]", field.ErrorTypeRequired},
		{"dockerconfigjson not JSON", func() field.ErrorList {
			return ValidateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{".dockerconfigjson": []byte("{")}})
		}, "data[.dockerconfigjson]", field.ErrorTypeInvalid},
		{"basic-auth without keys", func() field.ErrorList {
			return ValidateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Type: corev1.SecretTypeBasicAuth})
		}, "data[username]", field.ErrorTypeRequired},
		{"service-account-token without annotation", func() field.ErrorList {
			return ValidateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Type: corev1.SecretTypeServiceAccountToken})
		}, "metadata.annotations[kubernetes.io/service-account.name]", field.ErrorTypeRequired},
		{"service account name", func() field.ErrorList {
			return ValidateServiceAccount(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "Ray", Namespace: "default"}})
		}, "metadata.name", field.ErrorTypeInvalid},

		// Nodes, endpoints, slices, events, leases.
		{"node taint effect", func() field.ErrorList {
			return ValidateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "gpu", Effect: "Never"}}}})
		}, "spec.taints[0].effect", field.ErrorTypeNotSupported},
		{"node podCIDR", func() field.ErrorList {
			return ValidateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
				Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/33", PodCIDRs: []string{"10.244.0.0/33"}}})
		}, "spec.podCIDRs[0]", field.ErrorTypeInvalid},
		{"endpoints address", func() field.ErrorList {
			return ValidateEndpoints(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default"},
				Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.244.0"}},
					Ports: []corev1.EndpointPort{{Port: 80, Protocol: "TCP"}}}}})
		}, "subsets[0].addresses[0].ip", field.ErrorTypeInvalid},
		{"endpoints port protocol", func() field.ErrorList {
			return ValidateEndpoints(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default"},
				Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.244.0.5"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}})
		}, "subsets[0].ports[0].protocol", field.ErrorTypeRequired},
		{"endpoint slice address type", func() field.ErrorList {
			return ValidateEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, AddressType: "IPv5"})
		}, "addressType", field.ErrorTypeNotSupported},
		{"endpoint slice address family", func() field.ErrorList {
			return ValidateEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"},
				AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}}})
		}, "endpoints[0].addresses[0]", field.ErrorTypeInvalid},
		{"endpoint slice empty endpoint", func() field.ErrorList {
			return ValidateEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"},
				AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{}}})
		}, "endpoints[0].addresses", field.ErrorTypeRequired},
		{"event in another namespace", func() field.ErrorList {
			ev := newEvent()
			ev.InvolvedObject.Namespace = "ray"
			return ValidateEvent(ev)
		}, "involvedObject.namespace", field.ErrorTypeInvalid},
		{"new-style core event without controller", func() field.ErrorList {
			ev := newEvent()
			ev.EventTime, ev.Action, ev.ReportingInstance = metav1.NowMicro(), "Start", "node-1"
			return ValidateEvent(ev)
		}, "reportingComponent", field.ErrorTypeRequired},
		{"events/v1 without controller", func() field.ErrorList {
			ev := newEventsV1()
			ev.ReportingController = ""
			return ValidateEventsV1Event(ev)
		}, "reportingController", field.ErrorTypeRequired},
		{"events/v1 without eventTime", func() field.ErrorList {
			ev := newEventsV1()
			ev.EventTime = metav1.MicroTime{}
			return ValidateEventsV1Event(ev)
		}, "eventTime", field.ErrorTypeRequired},
		{"events/v1 type", func() field.ErrorList {
			ev := newEventsV1()
			ev.Type = "Info"
			return ValidateEventsV1Event(ev)
		}, "type", field.ErrorTypeNotSupported},
		{"events/v1 regarding namespace", func() field.ErrorList {
			ev := newEventsV1()
			ev.Regarding.Namespace = "kube-system"
			return ValidateEventsV1Event(ev)
		}, "regarding.namespace", field.ErrorTypeInvalid},
		{"lease duration", func() field.ErrorList {
			return ValidateLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
				Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptrTo[int32](0)}})
		}, "spec.leaseDurationSeconds", field.ErrorTypeInvalid},

		// RBAC.
		{"role rule without verbs", func() field.ErrorList {
			return ValidateRole(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}})
		}, "rules[0].verbs", field.ErrorTypeRequired},
		{"role with non-resource URL", func() field.ErrorList {
			return ValidateRole(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"},
				Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}})
		}, "rules[0].nonResourceURLs", field.ErrorTypeInvalid},
		{"cluster role rule without resources", func() field.ErrorList {
			return ValidateClusterRole(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:r"},
				Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"ray.io"}}}})
		}, "rules[0].resources", field.ErrorTypeRequired},
		{"rbac name with slash", func() field.ErrorList {
			return ValidateRole(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "a/b", Namespace: "default"}})
		}, "metadata.name", field.ErrorTypeInvalid},
		{"role binding roleRef kind", func() field.ErrorList { return ValidateRoleBinding(rb("Group")) }, "roleRef.kind", field.ErrorTypeNotSupported},
		{"role binding roleRef name", func() field.ErrorList {
			b := rb("Role")
			b.RoleRef.Name = ""
			return ValidateRoleBinding(b)
		}, "roleRef.name", field.ErrorTypeRequired},
		{"role binding subject kind", func() field.ErrorList {
			return ValidateRoleBinding(rb("Role", rbacv1.Subject{Kind: "Robot", Name: "x"}))
		}, "subjects[0].kind", field.ErrorTypeNotSupported},
		{"cluster role binding to a Role", func() field.ErrorList {
			return ValidateClusterRoleBinding(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crb"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}})
		}, "roleRef.kind", field.ErrorTypeNotSupported},
		{"cluster role binding service account without namespace", func() field.ErrorList {
			return ValidateClusterRoleBinding(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crb"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "r"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kuberay-operator"}}})
		}, "subjects[0].namespace", field.ErrorTypeRequired},

		// Binding.
		{"binding without node", func() field.ErrorList {
			return ValidatePodBinding(&corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}})
		}, "target.name", field.ErrorTypeRequired},
		{"binding to a non-node", func() field.ErrorList {
			return ValidatePodBinding(&corev1.Binding{Target: corev1.ObjectReference{Kind: "Pod", Name: "x"}})
		}, "target.kind", field.ErrorTypeNotSupported},
	}
	if len(cases) < 60 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.errs()
			for _, e := range errs {
				if e.Field == tc.field && e.Type == tc.typ {
					return
				}
			}
			t.Errorf("want %s error at %q, got %v", tc.typ, tc.field, errs)
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ray-system"}}
	defaults.SetNamespaceDefaults(ns)
	headless := minimalService()
	headless.Name, headless.Spec.ClusterIP, headless.Spec.Ports = "raycluster-sample-headless", "None", nil
	headless.Spec.ClusterIPs = nil
	defaults.SetServiceDefaults(headless)
	lb := minimalService()
	lb.Spec.Type = corev1.ServiceTypeNodePort
	lb.Spec.Ports[1].NodePort = 30265
	defaults.SetServiceDefaults(lb)
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "dashboard.example.com."}}
	defaults.SetServiceDefaults(ext)
	assigned := minimalService()
	assigned.Spec.ClusterIP, assigned.Spec.ClusterIPs = "10.96.0.12", []string{"10.96.0.12"}
	tlsSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "default"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}}
	dockerSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: "default"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`)}}
	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "o", Namespace: "default"}, Data: map[string][]byte{"redis-password": []byte("x")}}
	defaults.SetSecretDefaults(opaque)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rayctl-node", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"},
			Taints: []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{"cpu": resource.MustParse("8"), "pods": resource.MustParse("110")},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}}}}
	defaults.SetNodeDefaults(node)
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "raycluster-sample-head-svc", Namespace: "default"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.244.0.5", NodeName: ptrTo("rayctl-node")}},
			Ports: []corev1.EndpointPort{{Name: "gcs-server", Port: 6379}, {Name: "dashboard", Port: 8265}}}}}
	defaults.SetEndpointsDefaults(eps)
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "raycluster-sample-head-svc-abcde", Namespace: "default"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, NodeName: ptrTo("rayctl-node")}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("dashboard"), Port: ptrTo[int32](8265)}}}
	defaults.SetEndpointSliceDefaults(slice)
	nodeEvent := newEvent()
	nodeEvent.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "rayctl-node"}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kuberay-operator"},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "kuberay-operator"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kuberay-operator", Namespace: "ray-system"}, {Kind: "User", Name: "admin"}}}
	defaults.SetClusterRoleBindingDefaults(crb)
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:kuberay"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters", "rayclusters/status"}},
		{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}}}
	holder := "rayctl-node"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "rayctl-node", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptrTo[int32](40)}}

	cases := map[string]field.ErrorList{
		"kuberay head pod":      ValidatePod(defaulted(rayHeadPod())),
		"kuberay worker pod":    ValidatePod(defaulted(rayWorkerPod())),
		"minimal pod":           ValidatePod(minimalPod()),
		"service":               ValidateService(minimalService()),
		"service with IP":       ValidateService(assigned),
		"headless service":      ValidateService(headless),
		"node port service":     ValidateService(lb),
		"external name service": ValidateService(ext),
		"job":                   ValidateJob(minimalJob()),
		"namespace":             ValidateNamespace(ns),
		"config map": ValidateConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ray-env", Namespace: "default"},
			Data: map[string]string{"RAY_LOG_LEVEL": "debug", "job.py": "print(1)"}, BinaryData: map[string][]byte{"blob.bin": {0}}}),
		"tls secret":        ValidateSecret(tlsSecret),
		"docker secret":     ValidateSecret(dockerSecret),
		"opaque secret":     ValidateSecret(opaque),
		"service account":   ValidateServiceAccount(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}),
		"node":              ValidateNode(node),
		"endpoints":         ValidateEndpoints(eps),
		"endpoint slice":    ValidateEndpointSlice(slice),
		"event":             ValidateEvent(newEvent()),
		"node event":        ValidateEvent(nodeEvent),
		"events/v1 event":   ValidateEventsV1Event(newEventsV1()),
		"lease":             ValidateLease(lease),
		"cluster role":      ValidateClusterRole(cr),
		"cluster role bind": ValidateClusterRoleBinding(crb),
		"role binding":      ValidateRoleBinding(rb("ClusterRole", rbacv1.Subject{Kind: "ServiceAccount", Name: "default"})),
		"binding":           ValidatePodBinding(&corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "rayctl-node"}}),
		"role":              ValidateRole(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}}),
	}
	for name, errs := range cases {
		if len(errs) != 0 {
			t.Errorf("%s: unexpected errors: %v", name, errs)
		}
	}
}
