package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RuleAllows reports whether rule grants the request described by attrs. A resource request must match the
// rule's verbs, API groups, resources (a "resource/subresource" pair, "*" or "*/subresource") and, when the
// rule names any, resource names; a non-resource request must match its verbs and non-resource URLs.
func RuleAllows(attrs authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !VerbMatches(rule, attrs.GetVerb()) {
		return false
	}
	if !attrs.IsResourceRequest() {
		return NonResourceURLMatches(rule, attrs.GetPath())
	}
	return APIGroupMatches(rule, attrs.GetAPIGroup()) &&
		ResourceMatches(rule, attrs.GetResource(), attrs.GetSubresource()) &&
		ResourceNameMatches(rule, attrs.GetName())
}

// VerbMatches reports whether rule names verb or "*".
func VerbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	return slices.Contains(rule.Verbs, rbacv1.VerbAll) || slices.Contains(rule.Verbs, verb)
}

// APIGroupMatches reports whether rule names group or "*".
func APIGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	return slices.Contains(rule.APIGroups, rbacv1.APIGroupAll) || slices.Contains(rule.APIGroups, group)
}

// ResourceMatches reports whether rule covers resource (and subresource, if not empty). "*" covers every
// resource and subresource; "pods" covers pods but not pods/status; "*/status" covers the status
// subresource of every resource.
func ResourceMatches(rule *rbacv1.PolicyRule, resource, subresource string) bool {
	combined := resource
	if subresource != "" {
		combined = resource + "/" + subresource
	}
	for _, r := range rule.Resources {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case subresource != "" && r == "*/"+subresource:
			return true
		}
	}
	return false
}

// ResourceNameMatches reports whether rule applies to the object called name: a rule without resource
// names applies to every object, one with them only to those objects (so never to a request without a
// name, such as create or list).
func ResourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	return len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, name)
}

// NonResourceURLMatches reports whether rule covers path: exactly, through "*", or through a pattern
// ending in "*" that path starts with.
func NonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if prefix, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}
