package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func minimalClaim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func minimalVolume() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pv-1"}},
		},
	}
}

func minimalIngress() *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "dash", Namespace: "default"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: "ray.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "head-svc", Port: networkingv1.ServiceBackendPort{Number: 8265}}},
			}}}},
		}}},
	}
}

// TestValidateStorageAndNetworking: each new kind accepts its minimal form and rejects a broken one at
// the field's path.
func TestValidateStorageAndNetworking(t *testing.T) {
	for _, tc := range []struct {
		name string
		errs func() field.ErrorList
		path string // "" means valid
	}{
		{"claim", func() field.ErrorList { return ValidatePersistentVolumeClaim(minimalClaim()) }, ""},
		{"claim without access modes", func() field.ErrorList {
			c := minimalClaim()
			c.Spec.AccessModes = nil
			return ValidatePersistentVolumeClaim(c)
		}, "spec.accessModes"},
		{"claim of zero bytes", func() field.ErrorList {
			c := minimalClaim()
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
			return ValidatePersistentVolumeClaim(c)
		}, "spec.resources.requests[storage]"},
		{"claim binding once", func() field.ErrorList {
			old, c := minimalClaim(), minimalClaim()
			old.ResourceVersion, c.ResourceVersion = "1", "1"
			c.Spec.VolumeName = "pv-1"
			c.Spec.StorageClassName = ptrTo("local-path")
			return ValidatePersistentVolumeClaimUpdate(c, old)
		}, ""},
		{"claim changing access modes", func() field.ErrorList {
			old, c := minimalClaim(), minimalClaim()
			old.ResourceVersion, c.ResourceVersion = "1", "1"
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			return ValidatePersistentVolumeClaimUpdate(c, old)
		}, "spec"},
		{"claim shrinking", func() field.ErrorList {
			old, c := minimalClaim(), minimalClaim()
			old.ResourceVersion, c.ResourceVersion = "1", "1"
			c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}
			return ValidatePersistentVolumeClaimUpdate(c, old)
		}, "spec.resources.requests.storage"},
		{"volume", func() field.ErrorList { return ValidatePersistentVolume(minimalVolume()) }, ""},
		{"volume with a relative hostPath", func() field.ErrorList {
			v := minimalVolume()
			v.Spec.HostPath.Path = "data"
			return ValidatePersistentVolume(v)
		}, "spec.hostPath.path"},
		{"volume without a source", func() field.ErrorList {
			v := minimalVolume()
			v.Spec.HostPath = nil
			return ValidatePersistentVolume(v)
		}, "spec"},
		{"volume with an unknown reclaim policy", func() field.ErrorList {
			v := minimalVolume()
			v.Spec.PersistentVolumeReclaimPolicy = "Shred"
			return ValidatePersistentVolume(v)
		}, "spec.persistentVolumeReclaimPolicy"},
		{"class", func() field.ErrorList {
			return ValidateStorageClass(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path"}, Provisioner: "rayctl.io/local-path"})
		}, ""},
		{"class without provisioner", func() field.ErrorList {
			return ValidateStorageClass(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
		}, "provisioner"},
		{"class with an unknown binding mode", func() field.ErrorList {
			mode := storagev1.VolumeBindingMode("Later")
			return ValidateStorageClass(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Provisioner: "a.io/b", VolumeBindingMode: &mode})
		}, "volumeBindingMode"},
		{"ingress", func() field.ErrorList { return ValidateIngress(minimalIngress()) }, ""},
		{"ingress with a relative Prefix path", func() field.ErrorList {
			i := minimalIngress()
			i.Spec.Rules[0].HTTP.Paths[0].Path = "dash"
			return ValidateIngress(i)
		}, "spec.rules[0].http.paths[0].path"},
		{"ingress backend with port name and number", func() field.ErrorList {
			i := minimalIngress()
			i.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name = "dashboard"
			return ValidateIngress(i)
		}, "spec.rules[0].http.paths[0].backend.service.port"},
		{"ingress with an IP host", func() field.ErrorList {
			i := minimalIngress()
			i.Spec.Rules[0].Host = "10.0.0.1"
			return ValidateIngress(i)
		}, "spec.rules[0].host"},
		{"ingress class without a domain", func() field.ErrorList {
			return ValidateIngressClass(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: networkingv1.IngressClassSpec{Controller: "nginx"}})
		}, "spec.controller"},
		{"network policy with an except outside its cidr", func() field.ErrorList {
			return ValidateNetworkPolicy(&networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: "np", Namespace: "default"},
				Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"192.168.0.0/16"}}}},
				}}},
			})
		}, "spec.ingress[0].from[0].ipBlock.except[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.errs()
			if tc.path == "" {
				if len(errs) > 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.path {
					return
				}
			}
			t.Errorf("want an error at %s, got %v", tc.path, errs)
		})
	}
}
