package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	accessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany,
		corev1.ReadWriteMany, corev1.ReadWriteOncePod}
	volumeModes    = []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock}
	reclaimRules   = []corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle}
	claimPhases    = []corev1.PersistentVolumeClaimPhase{corev1.ClaimPending, corev1.ClaimBound, corev1.ClaimLost}
	volumePhases   = []corev1.PersistentVolumePhase{corev1.VolumePending, corev1.VolumeAvailable, corev1.VolumeBound, corev1.VolumeReleased, corev1.VolumeFailed}
	bindingModes   = []storagev1.VolumeBindingMode{storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer}
	classReclaimed = []corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete}
)

// ValidatePersistentVolumeClaim checks a PersistentVolumeClaim: metadata, at least one access mode (each a
// known one, ReadWriteOncePod alone), a positive storage request, the volume mode, and the class and volume
// names.
func ValidatePersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	allErrs := namespacedMeta(&pvc.ObjectMeta, NameIsDNSSubdomain)
	spec, p := &pvc.Spec, field.NewPath("spec")
	allErrs = append(allErrs, validateAccessModes(spec.AccessModes, p.Child("accessModes"))...)
	allErrs = append(allErrs, positiveStorage(spec.Resources.Requests, p.Child("resources", "requests").Key(string(corev1.ResourceStorage)))...)
	if spec.VolumeMode != nil {
		allErrs = append(allErrs, oneOf(*spec.VolumeMode, p.Child("volumeMode"), volumeModes...)...)
	}
	if spec.StorageClassName != nil && *spec.StorageClassName != "" {
		allErrs = append(allErrs, dnsSubdomain(*spec.StorageClassName, p.Child("storageClassName"))...)
	}
	if spec.VolumeName != "" {
		allErrs = append(allErrs, dnsSubdomain(spec.VolumeName, p.Child("volumeName"))...)
	}
	if spec.Selector != nil {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	return allErrs
}

// ValidatePersistentVolumeClaimUpdate checks an update of a claim: its spec is immutable except that a
// claim may be bound to a volume once (spec.volumeName set where it was empty), given a class once (the
// default class assigned to a claim that named none), and grow its storage request.
func ValidatePersistentVolumeClaimUpdate(newPVC, oldPVC *corev1.PersistentVolumeClaim) field.ErrorList {
	allErrs := metaUpdate(&newPVC.ObjectMeta, &oldPVC.ObjectMeta)
	allErrs = append(allErrs, ValidatePersistentVolumeClaim(newPVC)...)
	p := field.NewPath("spec")
	mutable := newPVC.Spec.DeepCopy()
	if oldPVC.Spec.VolumeName == "" {
		mutable.VolumeName = ""
	}
	if oldPVC.Spec.StorageClassName == nil {
		mutable.StorageClassName = nil
	}
	newSize, oldSize := mutable.Resources.Requests[corev1.ResourceStorage], oldPVC.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 {
		allErrs = append(allErrs, field.Forbidden(p.Child("resources", "requests", "storage"), "field can not be less than previous value"))
	}
	mutable.Resources = oldPVC.Spec.Resources
	if !apiequalityDeepEqual(*mutable, oldPVC.Spec) {
		allErrs = append(allErrs, field.Forbidden(p, "spec is immutable after creation except resources.requests, and volumeName and storageClassName while unset"))
	}
	return allErrs
}

// ValidatePersistentVolumeClaimStatusUpdate checks an update of persistentvolumeclaims/status: a known
// phase and non-negative capacity.
func ValidatePersistentVolumeClaimStatusUpdate(newPVC, oldPVC *corev1.PersistentVolumeClaim) field.ErrorList {
	allErrs := metaUpdate(&newPVC.ObjectMeta, &oldPVC.ObjectMeta)
	p := field.NewPath("status")
	allErrs = append(allErrs, optionalOneOf(newPVC.Status.Phase, p.Child("phase"), claimPhases...)...)
	allErrs = append(allErrs, validateAccessModes(newPVC.Status.AccessModes, p.Child("accessModes"), true)...)
	for _, name := range sortedKeys(newPVC.Status.Capacity) {
		q := newPVC.Status.Capacity[name]
		if q.Sign() < 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("capacity").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	return allErrs
}

// ValidatePersistentVolume checks a PersistentVolume: metadata, a positive storage capacity, at least one
// access mode, exactly one volume source (an absolute path for hostPath and local), the reclaim policy, the
// volume mode and a claim reference with a name.
func ValidatePersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	allErrs := clusterMeta(&pv.ObjectMeta, NameIsDNSSubdomain)
	spec, p := &pv.Spec, field.NewPath("spec")
	allErrs = append(allErrs, validateAccessModes(spec.AccessModes, p.Child("accessModes"))...)
	allErrs = append(allErrs, positiveStorage(spec.Capacity, p.Child("capacity").Key(string(corev1.ResourceStorage)))...)
	set := setMembers(&spec.PersistentVolumeSource)
	switch {
	case len(set) == 0:
		allErrs = append(allErrs, field.Required(p, "must specify a volume type"))
	case len(set) > 1:
		for _, extra := range set[1:] {
			allErrs = append(allErrs, field.Forbidden(p.Child(extra), "may not specify more than 1 volume type"))
		}
	}
	if hp := spec.HostPath; hp != nil {
		allErrs = append(allErrs, absolutePath(hp.Path, p.Child("hostPath", "path"))...)
		if hp.Type != nil {
			allErrs = append(allErrs, optionalOneOf(*hp.Type, p.Child("hostPath", "type"), supportedHostPathTypes...)...)
		}
	}
	if spec.Local != nil {
		allErrs = append(allErrs, absolutePath(spec.Local.Path, p.Child("local", "path"))...)
		if spec.NodeAffinity == nil {
			allErrs = append(allErrs, field.Required(p.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
	}
	allErrs = append(allErrs, optionalOneOf(spec.PersistentVolumeReclaimPolicy, p.Child("persistentVolumeReclaimPolicy"), reclaimRules...)...)
	if spec.VolumeMode != nil {
		allErrs = append(allErrs, oneOf(*spec.VolumeMode, p.Child("volumeMode"), volumeModes...)...)
	}
	if spec.StorageClassName != "" {
		allErrs = append(allErrs, dnsSubdomain(spec.StorageClassName, p.Child("storageClassName"))...)
	}
	if ref := spec.ClaimRef; ref != nil && ref.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("claimRef", "name"), ""))
	}
	return allErrs
}

// ValidatePersistentVolumeUpdate checks an update of a volume: its source and volume mode are immutable.
func ValidatePersistentVolumeUpdate(newPV, oldPV *corev1.PersistentVolume) field.ErrorList {
	allErrs := metaUpdate(&newPV.ObjectMeta, &oldPV.ObjectMeta)
	allErrs = append(allErrs, ValidatePersistentVolume(newPV)...)
	p := field.NewPath("spec")
	allErrs = append(allErrs, immutable(newPV.Spec.PersistentVolumeSource, oldPV.Spec.PersistentVolumeSource, p.Child("persistentvolumesource"))...)
	allErrs = append(allErrs, immutable(newPV.Spec.VolumeMode, oldPV.Spec.VolumeMode, p.Child("volumeMode"))...)
	return allErrs
}

// ValidatePersistentVolumeStatusUpdate checks an update of persistentvolumes/status: a known phase.
func ValidatePersistentVolumeStatusUpdate(newPV, oldPV *corev1.PersistentVolume) field.ErrorList {
	allErrs := metaUpdate(&newPV.ObjectMeta, &oldPV.ObjectMeta)
	return append(allErrs, optionalOneOf(newPV.Status.Phase, field.NewPath("status", "phase"), volumePhases...)...)
}

// ValidateStorageClass checks a StorageClass: metadata, a provisioner that is a qualified name, the reclaim
// policy (Retain or Delete), the binding mode and the parameters' count.
func ValidateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	allErrs := clusterMeta(&sc.ObjectMeta, NameIsDNSSubdomain)
	if sc.Provisioner == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("provisioner"), ""))
	} else {
		allErrs = append(allErrs, qualifiedName(sc.Provisioner, field.NewPath("provisioner"))...)
	}
	if sc.ReclaimPolicy != nil {
		allErrs = append(allErrs, oneOf(*sc.ReclaimPolicy, field.NewPath("reclaimPolicy"), classReclaimed...)...)
	}
	if sc.VolumeBindingMode != nil {
		allErrs = append(allErrs, oneOf(*sc.VolumeBindingMode, field.NewPath("volumeBindingMode"), bindingModes...)...)
	}
	if len(sc.Parameters) > 512 {
		allErrs = append(allErrs, field.TooMany(field.NewPath("parameters"), len(sc.Parameters), 512))
	}
	return allErrs
}

// ValidateStorageClassUpdate checks an update of a class: provisioner, parameters, reclaim policy and
// binding mode are immutable.
func ValidateStorageClassUpdate(newSC, oldSC *storagev1.StorageClass) field.ErrorList {
	allErrs := metaUpdate(&newSC.ObjectMeta, &oldSC.ObjectMeta)
	allErrs = append(allErrs, ValidateStorageClass(newSC)...)
	allErrs = append(allErrs, immutable(newSC.Provisioner, oldSC.Provisioner, field.NewPath("provisioner"))...)
	allErrs = append(allErrs, immutable(newSC.Parameters, oldSC.Parameters, field.NewPath("parameters"))...)
	allErrs = append(allErrs, immutable(newSC.ReclaimPolicy, oldSC.ReclaimPolicy, field.NewPath("reclaimPolicy"))...)
	allErrs = append(allErrs, immutable(newSC.VolumeBindingMode, oldSC.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return allErrs
}

// validateAccessModes checks a list of access modes: known ones, ReadWriteOncePod alone, and at least one
// unless emptyOK.
func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, p *field.Path, emptyOK ...bool) field.ErrorList {
	var allErrs field.ErrorList
	if len(modes) == 0 && len(emptyOK) == 0 {
		return field.ErrorList{field.Required(p, "at least 1 access mode is required")}
	}
	for i, m := range modes {
		allErrs = append(allErrs, oneOf(m, p.Index(i), accessModes...)...)
		if m == corev1.ReadWriteOncePod && len(modes) > 1 {
			allErrs = append(allErrs, field.Forbidden(p, "may not use ReadWriteOncePod with other access modes"))
		}
	}
	return allErrs
}

// positiveStorage checks that list holds a storage quantity greater than zero.
func positiveStorage(list corev1.ResourceList, p *field.Path) field.ErrorList {
	q, ok := list[corev1.ResourceStorage]
	if !ok {
		return field.ErrorList{field.Required(p, "")}
	}
	if q.Cmp(resource.Quantity{}) <= 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than zero")}
	}
	return nil
}

// absolutePath checks that path is absolute and free of "..".
func absolutePath(path string, p *field.Path) field.ErrorList {
	if path == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if path[0] != '/' {
		return field.ErrorList{field.Invalid(p, path, "must be an absolute path")}
	}
	for _, item := range strings.Split(path, "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(p, path, "must not contain '..'")}
		}
	}
	return nil
}
