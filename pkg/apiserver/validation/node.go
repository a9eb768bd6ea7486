package validation

import (
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateRuntimeClass checks a RuntimeClass: metadata, and a handler that is a DNS label (it names a
// runtime of the node, as the CRI's runtime handlers are named).
func ValidateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	allErrs := clusterMeta(&rc.ObjectMeta, NameIsDNSSubdomain)
	p := field.NewPath("handler")
	if rc.Handler == "" {
		return append(allErrs, field.Required(p, ""))
	}
	return append(allErrs, dnsLabel(rc.Handler, p)...)
}

// ValidateRuntimeClassUpdate checks an update of a RuntimeClass: its handler cannot change.
func ValidateRuntimeClassUpdate(newRC, oldRC *nodev1.RuntimeClass) field.ErrorList {
	allErrs := append(metaUpdate(&newRC.ObjectMeta, &oldRC.ObjectMeta), ValidateRuntimeClass(newRC)...)
	return append(allErrs, immutable(newRC.Handler, oldRC.Handler, field.NewPath("handler"))...)
}
