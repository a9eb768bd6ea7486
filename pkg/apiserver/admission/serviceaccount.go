package admission

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apiserver/pkg/admission"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// What a pod's service-account volume holds and where it is mounted, as on every cluster.
const (
	// ServiceAccountMountPath is where containers find token, ca.crt and namespace.
	ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// RootCAConfigMap is the ConfigMap, in every namespace, whose ca.crt is the cluster's CA.
	RootCAConfigMap = "kube-root-ca.crt"
	// serviceAccountVolumePrefix starts the volume's name; five random characters end it.
	serviceAccountVolumePrefix = "kube-api-access-"
	// serviceAccountTokenSeconds is the projected token's lifetime, kube-apiserver's figure: an hour and
	// 7 seconds, which tells its tokens from others in audits.
	serviceAccountTokenSeconds = 3607
	defaultServiceAccount      = "default"
)

// serviceAccountAdmission is a mutating admission plugin doing what kube-apiserver's ServiceAccount plugin
// does for new pods: spec.serviceAccountName defaults to "default", and unless the pod or its
// ServiceAccount says automountServiceAccountToken: false, the pod gets a projected volume
// kube-api-access-<random> (a service-account token, the cluster CA from the kube-root-ca.crt ConfigMap,
// the namespace) mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount in every container
// that mounts nothing there yet. Mirror pods (a kubelet's) are left alone. Unlike kube-apiserver it does
// not refuse a pod whose ServiceAccount does not exist yet (the kubelet's token request waits for it).
type serviceAccountAdmission struct {
	*admission.Handler
	accounts corelisters.ServiceAccountLister
}

var _ admission.MutationInterface = &serviceAccountAdmission{}

func newServiceAccountAdmission(accounts corelisters.ServiceAccountLister) *serviceAccountAdmission {
	return &serviceAccountAdmission{Handler: admission.NewHandler(admission.Create), accounts: accounts}
}

// Admit defaults a new pod's service account and adds its token volume.
func (p *serviceAccountAdmission) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != podsResource || a.GetSubresource() != "" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = defaultServiceAccount
	}
	if !p.automount(a.GetNamespace(), pod) {
		return nil
	}
	name := serviceAccountVolumePrefix + utilrand.String(5)
	mounted := false
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if slices.ContainsFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == ServiceAccountMountPath }) {
				continue
			}
			cs[i].VolumeMounts = append(cs[i].VolumeMounts, corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: ServiceAccountMountPath})
			mounted = true
		}
	}
	if mounted {
		pod.Spec.Volumes = append(pod.Spec.Volumes, serviceAccountVolume(name))
	}
	return nil
}

// automount says whether pod gets a token: the pod's automountServiceAccountToken if set, else its
// ServiceAccount's, else yes.
func (p *serviceAccountAdmission) automount(namespace string, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	sa, err := p.accounts.ServiceAccounts(namespace).Get(pod.Spec.ServiceAccountName)
	if err == nil && sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	// An account not seen yet mounts, as a default one would.
	return true
}

// serviceAccountVolume is the projected volume kube-apiserver adds: token, ca.crt and namespace.
func serviceAccountVolume(name string) corev1.Volume {
	seconds, mode := int64(serviceAccountTokenSeconds), int32(0o644)
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &seconds, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMap},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}}
}
