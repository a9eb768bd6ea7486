package defaults

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptrTo[T any](v T) *T { return &v }

func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"busybox":                          corev1.PullAlways,
		"busybox:latest":                   corev1.PullAlways,
		"rayproject/ray:2.46.0":            corev1.PullIfNotPresent,
		"localhost:5000/ray":               corev1.PullAlways,
		"localhost:5000/ray:nightly":       corev1.PullIfNotPresent,
		"ray@sha256:abcdef":                corev1.PullIfNotPresent,
		"ray:latest@sha256:abcdef":         corev1.PullAlways,
		"registry.example.com:443/a/b:1.0": corev1.PullIfNotPresent,
	} {
		if got := DefaultPullPolicy(image); got != want {
			t.Errorf("%s: got %s, want %s", image, got, want)
		}
	}
}

func TestSetPodDefaults(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36"}},
		Containers: []corev1.Container{{
			Name:  "ray-head",
			Image: "rayproject/ray",
			Ports: []corev1.ContainerPort{{ContainerPort: 6379}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}},
			Env:   []corev1.EnvVar{{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8265)}}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 5},
		}},
		Volumes: []corev1.Volume{
			{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{DefaultMode: ptrTo[int32](0400)}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}}},
			{Name: "down", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
			{Name: "bare"},
		},
	}}
	SetPodDefaults(pod)
	s := &pod.Spec
	if s.RestartPolicy != corev1.RestartPolicyAlways || s.DNSPolicy != corev1.DNSClusterFirst || s.SchedulerName != "default-scheduler" {
		t.Errorf("spec defaults: %q %q %q", s.RestartPolicy, s.DNSPolicy, s.SchedulerName)
	}
	if *s.TerminationGracePeriodSeconds != 30 || s.SecurityContext == nil || !*s.EnableServiceLinks {
		t.Errorf("grace %v, securityContext %v, serviceLinks %v", *s.TerminationGracePeriodSeconds, s.SecurityContext, *s.EnableServiceLinks)
	}
	if s.ServiceAccountName != "default" || s.DeprecatedServiceAccount != "default" {
		t.Errorf("service account %q / %q", s.ServiceAccountName, s.DeprecatedServiceAccount)
	}
	c := s.Containers[0]
	if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("container: %q %q %q", c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy)
	}
	if s.InitContainers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("init pull policy %q", s.InitContainers[0].ImagePullPolicy)
	}
	if c.Ports[0].Protocol != corev1.ProtocolTCP || c.Ports[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("ports: %+v", c.Ports)
	}
	if c.Env[0].ValueFrom.FieldRef.APIVersion != "v1" {
		t.Errorf("fieldRef apiVersion %q", c.Env[0].ValueFrom.FieldRef.APIVersion)
	}
	if got := c.Resources.Requests[corev1.ResourceCPU]; got.String() != "1" {
		t.Errorf("explicit cpu request overwritten: %s", got.String())
	}
	if got := c.Resources.Requests[corev1.ResourceMemory]; got.String() != "4Gi" {
		t.Errorf("memory request not copied from limit: %s", got.String())
	}
	lp := c.LivenessProbe
	if lp.TimeoutSeconds != 1 || lp.PeriodSeconds != 10 || lp.SuccessThreshold != 1 || lp.FailureThreshold != 3 ||
		lp.HTTPGet.Path != "/" || lp.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Errorf("liveness probe: %+v %+v", lp, lp.HTTPGet)
	}
	if c.ReadinessProbe.PeriodSeconds != 5 {
		t.Errorf("explicit period overwritten")
	}
	v := s.Volumes
	if *v[1].ConfigMap.DefaultMode != 0644 || *v[2].Secret.DefaultMode != 0400 || *v[4].DownwardAPI.DefaultMode != 0644 {
		t.Errorf("modes: %o %o %o", *v[1].ConfigMap.DefaultMode, *v[2].Secret.DefaultMode, *v[4].DownwardAPI.DefaultMode)
	}
	if *v[3].HostPath.Type != corev1.HostPathUnset || v[4].DownwardAPI.Items[0].FieldRef.APIVersion != "v1" || v[5].EmptyDir == nil {
		t.Errorf("hostPath type %q, downward %q, bare %+v", *v[3].HostPath.Type, v[4].DownwardAPI.Items[0].FieldRef.APIVersion, v[5].VolumeSource)
	}

	again := pod.DeepCopy()
	SetPodDefaults(again)
	if !apiequality.Semantic.DeepEqual(again, pod) {
		t.Errorf("defaulting is not idempotent")
	}
}

func TestSetPodDefaultsHostNetworkAndServiceAccount(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true, DeprecatedServiceAccount: "ray",
		Containers: []corev1.Container{{Name: "c", Image: "x:1", Ports: []corev1.ContainerPort{{ContainerPort: 8265}}}}}}
	SetPodDefaults(pod)
	if pod.Spec.Containers[0].Ports[0].HostPort != 8265 {
		t.Errorf("hostPort %d", pod.Spec.Containers[0].Ports[0].HostPort)
	}
	if pod.Spec.ServiceAccountName != "ray" {
		t.Errorf("serviceAccountName %q", pod.Spec.ServiceAccountName)
	}
}

func TestSetServiceDefaults(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "gcs", Port: 6379}, {Name: "dash", Port: 8265, TargetPort: intstr.FromString("dashboard"), Protocol: "TCP"}},
	}}
	SetServiceDefaults(svc)
	s := svc.Spec
	if s.Type != corev1.ServiceTypeClusterIP || s.SessionAffinity != corev1.ServiceAffinityNone {
		t.Errorf("type %q affinity %q", s.Type, s.SessionAffinity)
	}
	if s.Ports[0].Protocol != corev1.ProtocolTCP || s.Ports[0].TargetPort != intstr.FromInt32(6379) || s.Ports[1].TargetPort.StrVal != "dashboard" {
		t.Errorf("ports %+v", s.Ports)
	}
	if *s.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack || len(s.IPFamilies) != 1 || s.IPFamilies[0] != corev1.IPv4Protocol {
		t.Errorf("families %v %v", *s.IPFamilyPolicy, s.IPFamilies)
	}
	if *s.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster || s.ExternalTrafficPolicy != "" || s.ClusterIP != "" {
		t.Errorf("policies %v %q, clusterIP %q", *s.InternalTrafficPolicy, s.ExternalTrafficPolicy, s.ClusterIP)
	}

	lb := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityClientIP, ClusterIP: "10.96.0.1"}}
	SetServiceDefaults(lb)
	if lb.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || !*lb.Spec.AllocateLoadBalancerNodePorts ||
		*lb.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10800 || lb.Spec.ClusterIPs[0] != "10.96.0.1" {
		t.Errorf("load balancer: %+v", lb.Spec)
	}

	headless := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "None"}}
	SetServiceDefaults(headless)
	if *headless.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyRequireDualStack {
		t.Errorf("selectorless headless policy %v", *headless.Spec.IPFamilyPolicy)
	}

	ext := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}
	SetServiceDefaults(ext)
	if ext.Spec.IPFamilyPolicy != nil || ext.Spec.IPFamilies != nil || ext.Spec.InternalTrafficPolicy != nil {
		t.Errorf("external name got IP settings: %+v", ext.Spec)
	}
}

func TestSetJobDefaultsAndSelector(t *testing.T) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34"}},
		}}},
	}
	SetJobDefaults(job)
	s := job.Spec
	if *s.Completions != 1 || *s.Parallelism != 1 || *s.BackoffLimit != 6 || *s.CompletionMode != batchv1.NonIndexedCompletion ||
		*s.Suspend || *s.PodReplacementPolicy != batchv1.TerminatingOrFailed {
		t.Errorf("job spec defaults: %+v", s)
	}
	if s.Template.Spec.TerminationGracePeriodSeconds == nil || s.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("template not defaulted")
	}
	if s.Selector != nil {
		t.Errorf("selector generated before the UID is known")
	}

	job.UID = "8d1f0e2a-5b1c-4a8e-9a3e-2f0c1d9b7e61"
	SetJobSelector(job)
	uid := string(job.UID)
	want := map[string]string{"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid, "batch.kubernetes.io/job-name": "pi", "job-name": "pi"}
	if !apiequality.Semantic.DeepEqual(job.Spec.Template.Labels, want) {
		t.Errorf("template labels %v", job.Spec.Template.Labels)
	}
	if !apiequality.Semantic.DeepEqual(job.Spec.Selector.MatchLabels, map[string]string{"batch.kubernetes.io/controller-uid": uid}) {
		t.Errorf("selector %v", job.Spec.Selector)
	}
	if !apiequality.Semantic.DeepEqual(job.Labels, want) {
		t.Errorf("job labels %v", job.Labels)
	}

	parallel := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptrTo[int32](3), PodFailurePolicy: &batchv1.PodFailurePolicy{
		Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "DisruptionTarget"}}}}}}}
	SetJobDefaults(parallel)
	if parallel.Spec.Completions != nil || *parallel.Spec.PodReplacementPolicy != batchv1.Failed ||
		parallel.Spec.PodFailurePolicy.Rules[0].OnPodConditions[0].Status != corev1.ConditionTrue {
		t.Errorf("parallel job: %+v", parallel.Spec)
	}

	manual := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "u"}, Spec: batchv1.JobSpec{ManualSelector: ptrTo(true)}}
	SetJobSelector(manual)
	if manual.Spec.Selector != nil || manual.Spec.Template.Labels != nil {
		t.Errorf("manual selector touched: %+v", manual.Spec)
	}

	labelled := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}}}}
	SetJobDefaults(labelled)
	if labelled.Labels["app"] != "x" {
		t.Errorf("labels not copied from template: %v", labelled.Labels)
	}
}

func TestOtherDefaults(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ray"}}
	SetNamespaceDefaults(ns)
	if ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != "ray" {
		t.Errorf("namespace: %+v", ns)
	}

	secret := &corev1.Secret{}
	SetSecretDefaults(secret)
	if secret.Type != corev1.SecretTypeOpaque {
		t.Errorf("secret type %q", secret.Type)
	}

	node := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	SetNodeDefaults(node)
	if q := node.Status.Allocatable[corev1.ResourceCPU]; q.String() != "4" {
		t.Errorf("allocatable %v", node.Status.Allocatable)
	}

	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}}}}
	SetEndpointsDefaults(ep)
	if ep.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("endpoints protocol")
	}

	es := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: ptrTo[int32](80)}}}
	SetEndpointSliceDefaults(es)
	if *es.Ports[0].Protocol != corev1.ProtocolTCP || *es.Ports[0].Name != "" {
		t.Errorf("slice port %+v", es.Ports[0])
	}

	rb := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{
		{Kind: "ServiceAccount", Name: "sa"}, {Kind: "User", Name: "u"}, {Kind: "Group", Name: "g"}}}
	SetRBACDefaults(rb)
	if rb.RoleRef.APIGroup != rbacv1.GroupName || rb.Subjects[0].APIGroup != "" || rb.Subjects[1].APIGroup != rbacv1.GroupName ||
		rb.Subjects[2].APIGroup != rbacv1.GroupName {
		t.Errorf("rbac: %+v", rb)
	}
}

func TestRegisterDefaults(t *testing.T) {
	scheme := runtime.NewScheme()
	RegisterDefaults(scheme)
	pods := &corev1.PodList{Items: []corev1.Pod{{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
	scheme.Default(pods)
	if pods.Items[0].Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("pod list not defaulted")
	}
	crb := &rbacv1.ClusterRoleBinding{Subjects: []rbacv1.Subject{{Kind: "User", Name: "u"}}}
	scheme.Default(crb)
	if crb.Subjects[0].APIGroup != rbacv1.GroupName {
		t.Errorf("cluster role binding not defaulted")
	}
	job := &batchv1.Job{}
	scheme.Default(job)
	if job.Spec.BackoffLimit == nil {
		t.Errorf("job not defaulted")
	}
}

func TestTemplateGetsNoPodOnlyDefaults(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x:1",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	SetPodTemplateSpecDefaults(tmpl)
	s := tmpl.Spec
	if s.ServiceAccountName != "" || s.EnableServiceLinks != nil || s.Containers[0].Resources.Requests != nil {
		t.Errorf("template got pod-only defaults: sa %q links %v requests %v", s.ServiceAccountName, s.EnableServiceLinks, s.Containers[0].Resources.Requests)
	}
	if s.RestartPolicy != corev1.RestartPolicyAlways || s.Containers[0].TerminationMessagePath == "" {
		t.Errorf("template spec not defaulted")
	}
	named := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: "ray"}}
	SetPodTemplateSpecDefaults(named)
	if named.Spec.DeprecatedServiceAccount != "ray" {
		t.Errorf("deprecated serviceAccount not mirrored: %q", named.Spec.DeprecatedServiceAccount)
	}
}
