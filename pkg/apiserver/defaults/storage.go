package defaults

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// SetPersistentVolumeClaimDefaults defaults a claim: volume mode Filesystem and phase Pending.
func SetPersistentVolumeClaimDefaults(pvc *corev1.PersistentVolumeClaim) {
	pvc.Spec.VolumeMode = filesystemUnlessSet(pvc.Spec.VolumeMode)
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
}

// SetPersistentVolumeDefaults defaults a volume: reclaim policy Retain, volume mode Filesystem and phase
// Pending.
func SetPersistentVolumeDefaults(pv *corev1.PersistentVolume) {
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	pv.Spec.VolumeMode = filesystemUnlessSet(pv.Spec.VolumeMode)
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
}

// filesystemUnlessSet is mode, or Filesystem when mode is nil.
func filesystemUnlessSet(mode *corev1.PersistentVolumeMode) *corev1.PersistentVolumeMode {
	if mode != nil {
		return mode
	}
	fs := corev1.PersistentVolumeFilesystem
	return &fs
}

// SetStorageClassDefaults defaults a class: reclaim policy Delete and binding mode Immediate.
func SetStorageClassDefaults(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		policy := corev1.PersistentVolumeReclaimDelete
		sc.ReclaimPolicy = &policy
	}
	if sc.VolumeBindingMode == nil {
		mode := storagev1.VolumeBindingImmediate
		sc.VolumeBindingMode = &mode
	}
}

// SetNetworkPolicyDefaults defaults a NetworkPolicy: ports' protocol TCP, and policy types Ingress (plus
// Egress when it has egress rules) when none are given.
func SetNetworkPolicyDefaults(np *networkingv1.NetworkPolicy) {
	tcp := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				p := corev1.ProtocolTCP
				ports[i].Protocol = &p
			}
		}
	}
	for i := range np.Spec.Ingress {
		tcp(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		tcp(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}
