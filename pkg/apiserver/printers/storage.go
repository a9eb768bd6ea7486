package printers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations that mark the default StorageClass and IngressClass when "true".
const (
	isDefaultStorageClass = "storageclass.kubernetes.io/is-default-class"
	isDefaultIngressClass = "ingressclass.kubernetes.io/is-default-class"
)

var (
	pvcDoc = corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()
	pvDoc  = corev1.PersistentVolumeSpec{}.SwaggerDoc()
)

// NewPersistentVolumeClaimTableConvertor prints claims as NAME STATUS VOLUME CAPACITY ACCESS MODES
// STORAGECLASS VOLUMEATTRIBUTESCLASS AGE, wide VOLUMEMODE.
func NewPersistentVolumeClaimTableConvertor() *Convertor[*corev1.PersistentVolumeClaim] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("Status", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"]),
		col("Volume", "string", pvcDoc["volumeName"]),
		col("Capacity", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"]),
		col("Access Modes", "string", pvcDoc["accessModes"]),
		col("StorageClass", "string", pvcDoc["storageClassName"]),
		col("VolumeAttributesClass", "string", pvcDoc["volumeAttributesClassName"]),
		ageColumn(),
		wideCol("VolumeMode", "string", pvcDoc["volumeMode"]),
	}, func(pvc *corev1.PersistentVolumeClaim) []any {
		capacity, modes := "", ""
		if pvc.Spec.VolumeName != "" {
			if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
				capacity = q.String()
			}
			modes = AccessModes(pvc.Status.AccessModes)
		}
		phase := string(pvc.Status.Phase)
		if pvc.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		class := ""
		if pvc.Spec.StorageClassName != nil {
			class = *pvc.Spec.StorageClassName
		}
		return []any{pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, class,
			orUnset(pvc.Spec.VolumeAttributesClassName), Age(pvc.CreationTimestamp), volumeMode(pvc.Spec.VolumeMode)}
	})
}

// NewPersistentVolumeTableConvertor prints volumes as NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS
// CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE, wide VOLUMEMODE.
func NewPersistentVolumeTableConvertor() *Convertor[*corev1.PersistentVolume] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("Capacity", "string", pvDoc["capacity"]),
		col("Access Modes", "string", pvDoc["accessModes"]),
		col("Reclaim Policy", "string", pvDoc["persistentVolumeReclaimPolicy"]),
		col("Status", "string", corev1.PersistentVolumeStatus{}.SwaggerDoc()["phase"]),
		col("Claim", "string", pvDoc["claimRef"]),
		col("StorageClass", "string", pvDoc["storageClassName"]),
		col("VolumeAttributesClass", "string", pvDoc["volumeAttributesClassName"]),
		col("Reason", "string", corev1.PersistentVolumeStatus{}.SwaggerDoc()["reason"]),
		ageColumn(),
		wideCol("VolumeMode", "string", pvDoc["volumeMode"]),
	}, func(pv *corev1.PersistentVolume) []any {
		claim := ""
		if ref := pv.Spec.ClaimRef; ref != nil {
			claim = ref.Namespace + "/" + ref.Name
		}
		capacity := ""
		if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
			capacity = q.String()
		}
		phase := string(pv.Status.Phase)
		if pv.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		return []any{pv.Name, capacity, AccessModes(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
			phase, claim, pv.Spec.StorageClassName, orUnset(pv.Spec.VolumeAttributesClassName), pv.Status.Reason,
			Age(pv.CreationTimestamp), volumeMode(pv.Spec.VolumeMode)}
	})
}

// NewStorageClassTableConvertor prints classes as NAME (with "(default)") PROVISIONER RECLAIMPOLICY
// VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE.
func NewStorageClassTableConvertor() *Convertor[*storagev1.StorageClass] {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("Provisioner", "string", doc["provisioner"]),
		col("ReclaimPolicy", "string", doc["reclaimPolicy"]),
		col("VolumeBindingMode", "string", doc["volumeBindingMode"]),
		col("AllowVolumeExpansion", "string", doc["allowVolumeExpansion"]),
		ageColumn(),
	}, func(sc *storagev1.StorageClass) []any {
		name := sc.Name
		if sc.Annotations[isDefaultStorageClass] == "true" {
			name += " (default)"
		}
		policy, mode := string(corev1.PersistentVolumeReclaimDelete), string(storagev1.VolumeBindingImmediate)
		if sc.ReclaimPolicy != nil {
			policy = string(*sc.ReclaimPolicy)
		}
		if sc.VolumeBindingMode != nil {
			mode = string(*sc.VolumeBindingMode)
		}
		expand := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
		return []any{name, sc.Provisioner, policy, mode, fmt.Sprint(expand), Age(sc.CreationTimestamp)}
	})
}

// NewIngressTableConvertor prints ingresses as NAME CLASS HOSTS ADDRESS PORTS AGE.
func NewIngressTableConvertor() *Convertor[*networkingv1.Ingress] {
	doc := networkingv1.IngressSpec{}.SwaggerDoc()
	return New([]metav1.TableColumnDefinition{
		nameColumn(),
		col("Class", "string", doc["ingressClassName"]),
		col("Hosts", "string", doc["rules"]),
		col("Address", "string", "Address is a list of IPs or hostnames of the load balancer"),
		col("Ports", "string", "Ports of TLS configurations that open"),
		ageColumn(),
	}, func(ing *networkingv1.Ingress) []any {
		class := "<none>"
		if ing.Spec.IngressClassName != nil {
			class = *ing.Spec.IngressClassName
		}
		var hosts []string
		for _, r := range ing.Spec.Rules {
			if r.Host != "" {
				hosts = append(hosts, r.Host)
			}
		}
		if len(hosts) == 0 {
			hosts = []string{"*"}
		}
		var addrs []string
		for _, lb := range ing.Status.LoadBalancer.Ingress {
			if lb.IP != "" {
				addrs = append(addrs, lb.IP)
			} else if lb.Hostname != "" {
				addrs = append(addrs, lb.Hostname)
			}
		}
		ports := "80"
		if len(ing.Spec.TLS) > 0 {
			ports = "80, 443"
		}
		return []any{ing.Name, class, listWithMore(hosts), strings.Join(addrs, ","), ports, Age(ing.CreationTimestamp)}
	})
}

// NewIngressClassTableConvertor prints ingress classes as NAME CONTROLLER PARAMETERS AGE.
func NewIngressClassTableConvertor() *Convertor[*networkingv1.IngressClass] {
	doc := networkingv1.IngressClassSpec{}.SwaggerDoc()
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Controller", "string", doc["controller"]), col("Parameters", "string", doc["parameters"]), ageColumn(),
	}, func(ic *networkingv1.IngressClass) []any {
		name, params := ic.Name, "<none>"
		if ic.Annotations[isDefaultIngressClass] == "true" {
			name += " (default)"
		}
		if p := ic.Spec.Parameters; p != nil {
			params = p.Kind + "/" + p.Name
			if p.APIGroup != nil && *p.APIGroup != "" {
				params = p.Kind + "." + *p.APIGroup + "/" + p.Name
			}
		}
		return []any{name, ic.Spec.Controller, params, Age(ic.CreationTimestamp)}
	})
}

// NewNetworkPolicyTableConvertor prints network policies as NAME POD-SELECTOR AGE.
func NewNetworkPolicyTableConvertor() *Convertor[*networkingv1.NetworkPolicy] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Pod-Selector", "string", networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]), ageColumn(),
	}, func(np *networkingv1.NetworkPolicy) []any {
		return []any{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), Age(np.CreationTimestamp)}
	})
}

// AccessModes abbreviates access modes as kubectl does: RWO,ROX,RWX,RWOP.
func AccessModes(modes []corev1.PersistentVolumeAccessMode) string {
	short := map[corev1.PersistentVolumeAccessMode]string{corev1.ReadWriteOnce: "RWO", corev1.ReadOnlyMany: "ROX",
		corev1.ReadWriteMany: "RWX", corev1.ReadWriteOncePod: "RWOP"}
	var out []string
	seen := map[string]bool{}
	for _, m := range modes {
		if s, ok := short[m]; ok && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

func volumeMode(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<unset>"
	}
	return string(*m)
}

func orUnset(s *string) string {
	if s == nil || *s == "" {
		return "<unset>"
	}
	return *s
}

// NewRuntimeClassTableConvertor prints runtime classes as NAME HANDLER AGE.
func NewRuntimeClassTableConvertor() *Convertor[*nodev1.RuntimeClass] {
	return New([]metav1.TableColumnDefinition{
		nameColumn(), col("Handler", "string", nodev1.RuntimeClass{}.SwaggerDoc()["handler"]), ageColumn(),
	}, func(rc *nodev1.RuntimeClass) []any {
		return []any{rc.Name, rc.Handler, Age(rc.CreationTimestamp)}
	})
}
