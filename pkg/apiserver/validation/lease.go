package validation

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateLease checks a coordination.k8s.io/v1 Lease: metadata, a positive
// leaseDurationSeconds, non-negative leaseTransitions, and preferredHolder
// only together with a strategy.
func ValidateLease(lease *coordinationv1.Lease) field.ErrorList {
	allErrs := namespacedMeta(&lease.ObjectMeta, NameIsDNSSubdomain)
	specPath := field.NewPath("spec")
	if d := lease.Spec.LeaseDurationSeconds; d != nil {
		allErrs = append(allErrs, positive(int64(*d), specPath.Child("leaseDurationSeconds"))...)
	}
	if t := lease.Spec.LeaseTransitions; t != nil {
		allErrs = append(allErrs, nonNegative(int64(*t), specPath.Child("leaseTransitions"))...)
	}
	if lease.Spec.PreferredHolder != nil && *lease.Spec.PreferredHolder != "" && lease.Spec.Strategy == nil {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	if s := lease.Spec.Strategy; s != nil {
		allErrs = append(allErrs, oneOf(*s, specPath.Child("strategy"), coordinationv1.OldestEmulationVersion)...)
	}
	return allErrs
}

// ValidateLeaseUpdate checks an update of a Lease.
func ValidateLeaseUpdate(newLease, oldLease *coordinationv1.Lease) field.ErrorList {
	return append(metaUpdate(&newLease.ObjectMeta, &oldLease.ObjectMeta), ValidateLease(newLease)...)
}
