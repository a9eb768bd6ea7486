package defaults

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// DefaultSchedulerName is the scheduler a pod gets when it names none.
	DefaultSchedulerName = corev1.DefaultSchedulerName
	// DefaultServiceAccountName is the service account a pod runs as when it names none.
	DefaultServiceAccountName = "default"
	// DefaultTerminationGracePeriodSeconds is the grace period a pod gets when it sets none.
	DefaultTerminationGracePeriodSeconds int64 = corev1.DefaultTerminationGracePeriodSeconds
	// DefaultTerminationMessagePath is where a container's termination message is read from.
	DefaultTerminationMessagePath = corev1.TerminationMessagePathDefault
	// DefaultVolumeMode is the file mode (0644) of files projected from
	// config maps, secrets and the downward API.
	DefaultVolumeMode int32 = 0644
)

// SetPodDefaults defaults a Pod: its spec (see SetPodSpecDefaults), plus
// what only pods get: enableServiceLinks true, serviceAccountName "default"
// (in a real cluster the ServiceAccount admission plugin's doing) and, per
// container, requests copied from limits for resources that only have a
// limit.
func SetPodDefaults(pod *corev1.Pod) {
	spec := &pod.Spec
	if spec.EnableServiceLinks == nil {
		t := corev1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &t
	}
	if spec.ServiceAccountName == "" && spec.DeprecatedServiceAccount == "" {
		spec.ServiceAccountName = DefaultServiceAccountName
	}
	SetPodSpecDefaults(spec)
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			requestsFromLimits(&cs[i].Resources)
		}
	}
}

// requestsFromLimits sets the request of every resource that has a limit but
// no request to the limit.
func requestsFromLimits(r *corev1.ResourceRequirements) {
	if len(r.Limits) == 0 {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
}

// SetPodTemplateSpecDefaults defaults the spec of a pod template (see
// SetPodSpecDefaults). As in Kubernetes, the pod-only defaults of
// SetPodDefaults are left to the pods made from the template.
func SetPodTemplateSpecDefaults(t *corev1.PodTemplateSpec) {
	SetPodSpecDefaults(&t.Spec)
}

// SetPodSpecDefaults defaults a pod spec: restartPolicy Always, dnsPolicy
// ClusterFirst, terminationGracePeriodSeconds 30, schedulerName
// default-scheduler, serviceAccountName and the deprecated serviceAccount
// mirroring each other, an empty securityContext; the containers
// (SetContainerDefaults), volumes (SetVolumeDefaults), and host ports equal
// to container ports on the host network.
func SetPodSpecDefaults(spec *corev1.PodSpec) {
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := DefaultTerminationGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &g
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = DefaultSchedulerName
	}
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	if spec.DeprecatedServiceAccount == "" {
		spec.DeprecatedServiceAccount = spec.ServiceAccountName
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	for i := range spec.InitContainers {
		SetContainerDefaults(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		SetContainerDefaults(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		c := &spec.EphemeralContainers[i].EphemeralContainerCommon
		defaultContainerFields(&c.TerminationMessagePath, &c.TerminationMessagePolicy, &c.ImagePullPolicy, c.Image)
		setEnvDefaults(c.Env)
	}
	for i := range spec.Volumes {
		SetVolumeDefaults(&spec.Volumes[i])
	}
	if spec.HostNetwork {
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for i := range cs {
				for j := range cs[i].Ports {
					if cs[i].Ports[j].HostPort == 0 {
						cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
					}
				}
			}
		}
	}
}

// SetContainerDefaults defaults a container: terminationMessagePath
// /dev/termination-log, terminationMessagePolicy File, imagePullPolicy
// (Always for a ":latest" or untagged image, else IfNotPresent), port
// protocol TCP, probe and lifecycle handler defaults, and env fieldRef
// apiVersion v1.
func SetContainerDefaults(c *corev1.Container) {
	defaultContainerFields(&c.TerminationMessagePath, &c.TerminationMessagePolicy, &c.ImagePullPolicy, c.Image)
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	setProbeDefaults(c.LivenessProbe)
	setProbeDefaults(c.ReadinessProbe)
	setProbeDefaults(c.StartupProbe)
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				setHTTPGetDefaults(h.HTTPGet)
			}
		}
	}
	setEnvDefaults(c.Env)
}

func defaultContainerFields(msgPath *string, msgPolicy *corev1.TerminationMessagePolicy, pull *corev1.PullPolicy, image string) {
	if *msgPath == "" {
		*msgPath = DefaultTerminationMessagePath
	}
	if *msgPolicy == "" {
		*msgPolicy = corev1.TerminationMessageReadFile
	}
	if *pull == "" {
		*pull = DefaultPullPolicy(image)
	}
}

// DefaultPullPolicy returns the image pull policy Kubernetes picks for an
// image reference: Always when the tag is "latest" or there is neither tag
// nor digest, IfNotPresent otherwise.
func DefaultPullPolicy(image string) corev1.PullPolicy {
	ref := image
	digest := ""
	if at := strings.Index(ref, "@"); at >= 0 {
		ref, digest = ref[:at], ref[at+1:]
	}
	tag := ""
	lastSlash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > lastSlash {
		tag = ref[colon+1:]
	}
	if tag == "latest" || (tag == "" && digest == "") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func setEnvDefaults(env []corev1.EnvVar) {
	for i := range env {
		if vf := env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
}

// setProbeDefaults applies timeoutSeconds 1, periodSeconds 10,
// successThreshold 1, failureThreshold 3 and the handler defaults.
func setProbeDefaults(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	setHTTPGetDefaults(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		empty := ""
		p.GRPC.Service = &empty
	}
}

// setHTTPGetDefaults applies path "/" and scheme HTTP.
func setHTTPGetDefaults(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// SetVolumeDefaults defaults a volume: a volume without any source becomes an
// emptyDir; configMap, secret, downwardAPI and projected volumes get
// defaultMode 0644; hostPath gets type "" (unset); downward API field
// references get apiVersion v1.
func SetVolumeDefaults(v *corev1.Volume) {
	src := &v.VolumeSource
	if *src == (corev1.VolumeSource{}) {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	mode := func(m **int32) {
		if *m == nil {
			d := DefaultVolumeMode
			*m = &d
		}
	}
	if src.ConfigMap != nil {
		mode(&src.ConfigMap.DefaultMode)
	}
	if src.Secret != nil {
		mode(&src.Secret.DefaultMode)
	}
	if src.DownwardAPI != nil {
		mode(&src.DownwardAPI.DefaultMode)
		setDownwardAPIDefaults(src.DownwardAPI.Items)
	}
	if src.Projected != nil {
		mode(&src.Projected.DefaultMode)
		for i := range src.Projected.Sources {
			ps := &src.Projected.Sources[i]
			if ps.DownwardAPI != nil {
				setDownwardAPIDefaults(ps.DownwardAPI.Items)
			}
			if ps.ServiceAccountToken != nil && ps.ServiceAccountToken.ExpirationSeconds == nil {
				s := int64(3600)
				ps.ServiceAccountToken.ExpirationSeconds = &s
			}
		}
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		t := corev1.HostPathUnset
		src.HostPath.Type = &t
	}
}

func setDownwardAPIDefaults(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if items[i].FieldRef != nil && items[i].FieldRef.APIVersion == "" {
			items[i].FieldRef.APIVersion = "v1"
		}
	}
}

// zeroIntOrString reports whether a target port is unset.
func zeroIntOrString(p intstr.IntOrString) bool {
	return (p.Type == intstr.Int && p.IntVal == 0) || (p.Type == intstr.String && p.StrVal == "")
}
