package validation

import (
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rayctl/rayctl/pkg/apiserver/defaults"
)

func TestInvalidMessageLooksLikeKubernetes(t *testing.T) {
	p := minimalPod()
	p.Spec.Containers[0].Image = ""
	err := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, p.Name, ValidatePod(p))
	want := `Pod "x" is invalid: spec.containers[0].image: Required value`
	if err.Error() != want {
		t.Fatalf("got %q, want %q", err.Error(), want)
	}
	if err.ErrStatus.Code != 422 {
		t.Fatalf("code %d", err.ErrStatus.Code)
	}
}

// stored returns a copy of obj's metadata as the server would hold it.
func stored(m *metav1.ObjectMeta) {
	m.ResourceVersion = "42"
	m.UID = "0d8a3e1c-8a49-4c59-8f69-2c4f5ec0a1b2"
}

func hasError(errs field.ErrorList, path string, typ field.ErrorType, detail string) bool {
	for _, e := range errs {
		if e.Field == path && e.Type == typ && strings.Contains(e.Detail, detail) {
			return true
		}
	}
	return false
}

func TestValidatePodUpdate(t *testing.T) {
	old := defaulted(rayHeadPod())
	stored(&old.ObjectMeta)
	old.Spec.ActiveDeadlineSeconds = ptrTo[int64](600)
	old.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptrTo[int64](300)}}

	ok := map[string]func(p *corev1.Pod){
		"labels":         func(p *corev1.Pod) { p.Labels["x"] = "y" },
		"image":          func(p *corev1.Pod) { p.Spec.Containers[0].Image = "rayproject/ray:2.47.0" },
		"lower deadline": func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo[int64](60) },
		"add toleration": func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "b", Operator: "Exists"})
		},
		"lower tolerationSecond": func(p *corev1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = ptrTo[int64](10) },
	}
	for name, mut := range ok {
		p := old.DeepCopy()
		mut(p)
		if errs := ValidatePodUpdate(p, old); len(errs) != 0 {
			t.Errorf("%s: %v", name, errs)
		}
	}

	bad := []struct {
		name, path string
		typ        field.ErrorType
		detail     string
		mut        func(p *corev1.Pod)
	}{
		{"command", "spec", field.ErrorTypeForbidden, "pod updates may not change fields other than `spec.containers[*].image`",
			func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"sleep"} }},
		{"node", "spec", field.ErrorTypeForbidden, "pod updates may not change fields", func(p *corev1.Pod) { p.Spec.NodeName = "other" }},
		{"add container", "spec.containers", field.ErrorTypeForbidden, "may not add or remove containers",
			func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{}) }},
		{"raise deadline", "spec.activeDeadlineSeconds", field.ErrorTypeInvalid, "must be less than or equal to previous value",
			func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo[int64](6000) }},
		{"unset deadline", "spec.activeDeadlineSeconds", field.ErrorTypeInvalid, "must not update from a positive integer to nil value",
			func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }},
		{"remove toleration", "spec.tolerations", field.ErrorTypeForbidden, "existing toleration can not be modified",
			func(p *corev1.Pod) { p.Spec.Tolerations = nil }},
		{"rename", "metadata.name", field.ErrorTypeInvalid, "field is immutable", func(p *corev1.Pod) { p.Name = "y" }},
		{"no resourceVersion", "metadata.resourceVersion", field.ErrorTypeInvalid, "must be specified for an update",
			func(p *corev1.Pod) { p.ResourceVersion = "" }},
		{"image removed", "spec.containers[0].image", field.ErrorTypeRequired, "", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }},
	}
	for _, tc := range bad {
		p := old.DeepCopy()
		tc.mut(p)
		if errs := ValidatePodUpdate(p, old); !hasError(errs, tc.path, tc.typ, tc.detail) {
			t.Errorf("%s: want %s at %s (%q), got %v", tc.name, tc.typ, tc.path, tc.detail, errs)
		}
	}
}

func TestValidatePodStatusUpdate(t *testing.T) {
	old := minimalPod()
	stored(&old.ObjectMeta)
	old.Spec.RestartPolicy = corev1.RestartPolicyNever
	old.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}

	p := old.DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	p.Status.PodIP, p.Status.PodIPs = "10.244.0.7", []corev1.PodIP{{IP: "10.244.0.7"}}
	p.Status.HostIP, p.Status.HostIPs = "192.168.1.10", []corev1.HostIP{{IP: "192.168.1.10"}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if errs := ValidatePodStatusUpdate(p, old); len(errs) != 0 {
		t.Fatalf("unexpected: %v", errs)
	}

	bad := map[string]func(p *corev1.Pod){
		"status.podIP":        func(p *corev1.Pod) { p.Status.PodIP = "10.244.0" },
		"status.podIPs[0].ip": func(p *corev1.Pod) { p.Status.PodIPs[0].IP = "10.244.0.8" },
		"status.phase":        func(p *corev1.Pod) { p.Status.Phase = "Done" },
		"status.containerStatuses[0].state": func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		},
		"status.nominatedNodeName": func(p *corev1.Pod) { p.Status.NominatedNodeName = "Node_1" },
		"status.hostIPs[0].ip":     func(p *corev1.Pod) { p.Status.HostIPs[0].IP = "192.168.1.11" },
	}
	for path, mut := range bad {
		q := p.DeepCopy()
		mut(q)
		found := false
		for _, e := range ValidatePodStatusUpdate(q, old) {
			found = found || e.Field == path
		}
		if !found {
			t.Errorf("want error at %s, got %v", path, ValidatePodStatusUpdate(q, old))
		}
	}
}

func TestValidateServiceUpdate(t *testing.T) {
	old := minimalService()
	stored(&old.ObjectMeta)
	old.Spec.ClusterIP, old.Spec.ClusterIPs = "10.96.0.12", []string{"10.96.0.12"}

	ok := old.DeepCopy()
	ok.Spec.Ports = ok.Spec.Ports[:2]
	ok.Spec.Type = corev1.ServiceTypeNodePort
	defaults.SetServiceDefaults(ok)
	if errs := ValidateServiceUpdate(ok, old); len(errs) != 0 {
		t.Fatalf("unexpected: %v", errs)
	}

	changed := old.DeepCopy()
	changed.Spec.ClusterIP, changed.Spec.ClusterIPs = "10.96.0.13", []string{"10.96.0.13"}
	if errs := ValidateServiceUpdate(changed, old); !hasError(errs, "spec.clusterIP", field.ErrorTypeInvalid, "field is immutable") {
		t.Fatalf("want clusterIP immutable, got %v", errs)
	}

	toExternal := old.DeepCopy()
	toExternal.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", SessionAffinity: "None"}
	if errs := ValidateServiceUpdate(toExternal, old); len(errs) != 0 {
		t.Fatalf("switching to ExternalName: %v", errs)
	}

	st := old.DeepCopy()
	st.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3"}}
	if errs := ValidateServiceStatusUpdate(st, old); !hasError(errs, "status.loadBalancer.ingress[0].ip", field.ErrorTypeInvalid, "") {
		t.Fatalf("want ingress ip error, got %v", errs)
	}
}

func TestValidateJobUpdate(t *testing.T) {
	old := minimalJob()
	stored(&old.ObjectMeta)

	ok := old.DeepCopy()
	ok.Spec.Suspend = ptrTo(true)
	ok.Spec.Parallelism = ptrTo[int32](0)
	if errs := ValidateJobUpdate(ok, old); len(errs) != 0 {
		t.Fatalf("unexpected: %v", errs)
	}
	for path, mut := range map[string]func(j *batchv1.Job){
		"spec.template":    func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "busybox" },
		"spec.completions": func(j *batchv1.Job) { j.Spec.Completions = ptrTo[int32](3) },
		"spec.selector": func(j *batchv1.Job) {
			j.Spec.Selector.MatchLabels["extra"] = "x"
			j.Spec.Template.Labels["extra"] = "x"
		},
	} {
		j := old.DeepCopy()
		mut(j)
		if errs := ValidateJobUpdate(j, old); !hasError(errs, path, field.ErrorTypeInvalid, "field is immutable") {
			t.Errorf("want %s immutable, got %v", path, errs)
		}
	}

	st := old.DeepCopy()
	st.Status.StartTime = &metav1.Time{Time: metav1.Now().Add(10)}
	st.Status.CompletionTime = &metav1.Time{Time: st.Status.StartTime.Add(-5)}
	st.Status.Failed = -1
	errs := ValidateJobStatusUpdate(st, old)
	if !hasError(errs, "status.completionTime", field.ErrorTypeInvalid, "") || !hasError(errs, "status.failed", field.ErrorTypeInvalid, "") {
		t.Fatalf("got %v", errs)
	}
}

func TestValidateOtherUpdates(t *testing.T) {
	oldSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Type: corev1.SecretTypeOpaque, Immutable: ptrTo(true),
		Data: map[string][]byte{"a": []byte("1")}}
	stored(&oldSecret.ObjectMeta)
	s := oldSecret.DeepCopy()
	s.Type = corev1.SecretTypeBasicAuth
	s.Data["username"] = []byte("u")
	errs := ValidateSecretUpdate(s, oldSecret)
	if !hasError(errs, "type", field.ErrorTypeInvalid, "field is immutable") || !hasError(errs, "data", field.ErrorTypeForbidden, "immutable") {
		t.Errorf("secret: %v", errs)
	}

	oldCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}, Immutable: ptrTo(true)}
	stored(&oldCM.ObjectMeta)
	cm := oldCM.DeepCopy()
	cm.Immutable = nil
	if errs := ValidateConfigMapUpdate(cm, oldCM); !hasError(errs, "immutable", field.ErrorTypeForbidden, "") {
		t.Errorf("config map: %v", errs)
	}

	oldRB := rb("Role")
	stored(&oldRB.ObjectMeta)
	newRB := oldRB.DeepCopy()
	newRB.RoleRef.Name = "other"
	if errs := ValidateRoleBindingUpdate(newRB, oldRB); !hasError(errs, "roleRef", field.ErrorTypeInvalid, "cannot change roleRef") {
		t.Errorf("role binding: %v", errs)
	}
	newRB = oldRB.DeepCopy()
	newRB.Subjects = []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}}
	if errs := ValidateRoleBindingUpdate(newRB, oldRB); len(errs) != 0 {
		t.Errorf("role binding subjects: %v", errs)
	}

	oldES := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, AddressType: discoveryv1.AddressTypeIPv4}
	stored(&oldES.ObjectMeta)
	es := oldES.DeepCopy()
	es.AddressType = discoveryv1.AddressTypeIPv6
	if errs := ValidateEndpointSliceUpdate(es, oldES); !hasError(errs, "addressType", field.ErrorTypeInvalid, "field is immutable") {
		t.Errorf("endpoint slice: %v", errs)
	}

	oldNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ray"}}
	defaults.SetNamespaceDefaults(oldNS)
	stored(&oldNS.ObjectMeta)
	ns := oldNS.DeepCopy()
	if errs := ValidateNamespaceUpdate(ns, oldNS); len(errs) != 0 {
		t.Errorf("namespace: %v", errs)
	}
	ns.Status.Phase = corev1.NamespaceTerminating
	if errs := ValidateNamespaceStatusUpdate(ns, oldNS); !hasError(errs, "status.phase", field.ErrorTypeInvalid, "") {
		t.Errorf("namespace status: %v", errs)
	}

	oldEv := newEvent()
	stored(&oldEv.ObjectMeta)
	ev := oldEv.DeepCopy()
	ev.Count, ev.Message = 3, "Started container c (x3)"
	if errs := ValidateEventUpdate(ev, oldEv); len(errs) != 0 {
		t.Errorf("event count bump: %v", errs)
	}
	ev.Reason = "Killing"
	if errs := ValidateEventUpdate(ev, oldEv); !hasError(errs, "reason", field.ErrorTypeInvalid, "field is immutable") {
		t.Errorf("event reason: %v", errs)
	}

	oldNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}}}
	stored(&oldNode.ObjectMeta)
	n := oldNode.DeepCopy()
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24"}
	if errs := ValidateNodeUpdate(n, oldNode); !hasError(errs, "spec.podCIDRs", field.ErrorTypeForbidden, "") {
		t.Errorf("node: %v", errs)
	}
}

// FuzzValidatePod decodes arbitrary JSON into a Pod, defaults and validates
// it, and validates it as an update of itself: none of it may panic.
func FuzzValidatePod(f *testing.F) {
	for _, p := range []*corev1.Pod{rayHeadPod(), rayWorkerPod(), minimalPod()} {
		b, _ := json.Marshal(p)
		f.Add(b)
	}
	f.Add([]byte(`{"spec":{"containers":[{"name":"c","livenessProbe":{},"env":[{"name":"x","valueFrom":{}}],"resources":{"limits":{"cpu":"-1"}}}],"volumes":[{"name":"v","projected":{"sources":[{}]}}]}}`))
	f.Add([]byte(`{"spec":{"initContainers":[{"restartPolicy":"Always","lifecycle":{"preStop":{}}}],"dnsPolicy":"None","dnsConfig":{},"tolerations":[{"tolerationSeconds":1}]}}`))
	f.Add([]byte(`{"spec":{"containers":[{"ports":[{"containerPort":-1}],"volumeMounts":[{}],"readinessProbe":{"httpGet":{"port":"x"},"grpc":{"port":0}}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p corev1.Pod
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		defaults.SetPodDefaults(&p)
		_ = ValidatePod(&p)
		_ = ValidatePodUpdate(p.DeepCopy(), &p)
		_ = ValidatePodStatusUpdate(p.DeepCopy(), &p)
		job := &batchv1.Job{ObjectMeta: p.ObjectMeta, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}}}
		defaults.SetJobDefaults(job)
		defaults.SetJobSelector(job)
		_ = ValidateJob(job)
	})
}
