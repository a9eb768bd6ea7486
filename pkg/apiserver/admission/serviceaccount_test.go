package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestServiceAccountAdmission(t *testing.T) {
	no := false
	accounts := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = accounts.Add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "quiet"}, AutomountServiceAccountToken: &no})
	p := newServiceAccountAdmission(corelisters.NewServiceAccountLister(accounts))
	admit := func(pod *corev1.Pod) *corev1.Pod {
		t.Helper()
		attrs := admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", pod.Name,
			corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, nil, false, &user.DefaultInfo{Name: "u"})
		if err := p.Admit(context.Background(), attrs, nil); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	newPod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "i"}},
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: ServiceAccountMountPath}}}},
		}}
	}

	pod := admit(newPod())
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName %q, want default", pod.Spec.ServiceAccountName)
	}
	if len(pod.Spec.Volumes) != 1 || !strings.HasPrefix(pod.Spec.Volumes[0].Name, "kube-api-access-") || pod.Spec.Volumes[0].Projected == nil {
		t.Fatalf("volumes %+v", pod.Spec.Volumes)
	}
	name := pod.Spec.Volumes[0].Name
	srcs := pod.Spec.Volumes[0].Projected.Sources
	if len(srcs) != 3 || srcs[0].ServiceAccountToken == nil || *srcs[0].ServiceAccountToken.ExpirationSeconds != 3607 ||
		srcs[1].ConfigMap == nil || srcs[1].ConfigMap.Name != "kube-root-ca.crt" || srcs[2].DownwardAPI == nil {
		t.Errorf("sources %+v", srcs)
	}
	for _, c := range []corev1.Container{pod.Spec.InitContainers[0], pod.Spec.Containers[0]} {
		if m := c.VolumeMounts; len(m) != 1 || m[0].Name != name || !m[0].ReadOnly || m[0].MountPath != ServiceAccountMountPath {
			t.Errorf("container %s mounts %+v", c.Name, m)
		}
	}
	if m := pod.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].Name != "own" {
		t.Errorf("a container mounting its own volume there got %+v", m)
	}

	off := newPod()
	off.Spec.AutomountServiceAccountToken = &no
	if pod := admit(off); len(pod.Spec.Volumes) != 0 || pod.Spec.ServiceAccountName != "default" {
		t.Errorf("automountServiceAccountToken: false on the pod: %+v", pod.Spec)
	}
	quiet := newPod()
	quiet.Spec.ServiceAccountName = "quiet"
	if pod := admit(quiet); len(pod.Spec.Volumes) != 0 {
		t.Errorf("automountServiceAccountToken: false on the ServiceAccount: volumes %+v", pod.Spec.Volumes)
	}
	mirror := newPod()
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	if pod := admit(mirror); len(pod.Spec.Volumes) != 0 || pod.Spec.ServiceAccountName != "" {
		t.Errorf("a mirror pod was changed: %+v", pod.Spec)
	}
}
