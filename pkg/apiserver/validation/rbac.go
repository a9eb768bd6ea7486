package validation

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateRole checks a Role: metadata (path-segment name) and rules, which
// must name verbs, API groups and resources and may not use non-resource URLs.
func ValidateRole(role *rbacv1.Role) field.ErrorList {
	allErrs := namespacedMeta(&role.ObjectMeta, NameIsPathSegment)
	for i := range role.Rules {
		allErrs = append(allErrs, validatePolicyRule(&role.Rules[i], true, field.NewPath("rules").Index(i))...)
	}
	return allErrs
}

// ValidateRoleUpdate checks an update of a Role.
func ValidateRoleUpdate(newRole, oldRole *rbacv1.Role) field.ErrorList {
	return append(metaUpdate(&newRole.ObjectMeta, &oldRole.ObjectMeta), ValidateRole(newRole)...)
}

// ValidateClusterRole checks a ClusterRole: cluster-scoped metadata
// (path-segment name), rules (resource rules or non-resource URL rules, not
// both) and aggregation selectors.
func ValidateClusterRole(role *rbacv1.ClusterRole) field.ErrorList {
	allErrs := clusterMeta(&role.ObjectMeta, NameIsPathSegment)
	for i := range role.Rules {
		allErrs = append(allErrs, validatePolicyRule(&role.Rules[i], false, field.NewPath("rules").Index(i))...)
	}
	if role.AggregationRule != nil {
		selPath := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(role.AggregationRule.ClusterRoleSelectors) == 0 {
			allErrs = append(allErrs, field.Required(selPath, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range role.AggregationRule.ClusterRoleSelectors {
			allErrs = append(allErrs, metav1validation.ValidateLabelSelector(&role.AggregationRule.ClusterRoleSelectors[i],
				metav1validation.LabelSelectorValidationOptions{}, selPath.Index(i))...)
		}
	}
	return allErrs
}

// ValidateClusterRoleUpdate checks an update of a ClusterRole.
func ValidateClusterRoleUpdate(newRole, oldRole *rbacv1.ClusterRole) field.ErrorList {
	return append(metaUpdate(&newRole.ObjectMeta, &oldRole.ObjectMeta), ValidateClusterRole(newRole)...)
}

func validatePolicyRule(rule *rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(rule.Verbs) == 0 {
		allErrs = append(allErrs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			allErrs = append(allErrs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return allErrs
	}
	if len(rule.APIGroups) == 0 {
		allErrs = append(allErrs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		allErrs = append(allErrs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return allErrs
}

// ValidateRoleBinding checks a RoleBinding: metadata, a roleRef to a Role or
// ClusterRole in rbac.authorization.k8s.io, and its subjects.
func ValidateRoleBinding(rb *rbacv1.RoleBinding) field.ErrorList {
	allErrs := namespacedMeta(&rb.ObjectMeta, NameIsPathSegment)
	allErrs = append(allErrs, validateRoleRef(&rb.RoleRef, []string{"Role", "ClusterRole"})...)
	for i := range rb.Subjects {
		allErrs = append(allErrs, validateSubject(&rb.Subjects[i], true, field.NewPath("subjects").Index(i))...)
	}
	return allErrs
}

// ValidateRoleBindingUpdate checks an update of a RoleBinding: roleRef cannot
// change.
func ValidateRoleBindingUpdate(newRB, oldRB *rbacv1.RoleBinding) field.ErrorList {
	allErrs := metaUpdate(&newRB.ObjectMeta, &oldRB.ObjectMeta)
	if newRB.RoleRef != oldRB.RoleRef {
		allErrs = append(allErrs, field.Invalid(field.NewPath("roleRef"), newRB.RoleRef, "cannot change roleRef"))
	}
	return append(allErrs, ValidateRoleBinding(newRB)...)
}

// ValidateClusterRoleBinding checks a ClusterRoleBinding: cluster-scoped
// metadata, a roleRef to a ClusterRole, and its subjects (service accounts
// need a namespace).
func ValidateClusterRoleBinding(crb *rbacv1.ClusterRoleBinding) field.ErrorList {
	allErrs := clusterMeta(&crb.ObjectMeta, NameIsPathSegment)
	allErrs = append(allErrs, validateRoleRef(&crb.RoleRef, []string{"ClusterRole"})...)
	for i := range crb.Subjects {
		allErrs = append(allErrs, validateSubject(&crb.Subjects[i], false, field.NewPath("subjects").Index(i))...)
	}
	return allErrs
}

// ValidateClusterRoleBindingUpdate checks an update of a ClusterRoleBinding:
// roleRef cannot change.
func ValidateClusterRoleBindingUpdate(newCRB, oldCRB *rbacv1.ClusterRoleBinding) field.ErrorList {
	allErrs := metaUpdate(&newCRB.ObjectMeta, &oldCRB.ObjectMeta)
	if newCRB.RoleRef != oldCRB.RoleRef {
		allErrs = append(allErrs, field.Invalid(field.NewPath("roleRef"), newCRB.RoleRef, "cannot change roleRef"))
	}
	return append(allErrs, ValidateClusterRoleBinding(newCRB)...)
}

func validateRoleRef(ref *rbacv1.RoleRef, kinds []string) field.ErrorList {
	var allErrs field.ErrorList
	p := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		allErrs = append(allErrs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	allErrs = append(allErrs, oneOf(ref.Kind, p.Child("kind"), kinds...)...)
	if ref.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, invalid(p.Child("name"), ref.Name, NameIsPathSegment(ref.Name, false))...)
	}
	return allErrs
}

func validateSubject(s *rbacv1.Subject, bindingNamespaced bool, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if s.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.APIGroup != "" {
			allErrs = append(allErrs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if s.Name != "" {
			allErrs = append(allErrs, dnsSubdomain(s.Name, p.Child("name"))...)
		}
		if !bindingNamespaced && s.Namespace == "" {
			allErrs = append(allErrs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			allErrs = append(allErrs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return allErrs
}
