package rbac

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// MissingPermissions returns what of rules authz does not allow u, in namespace ("" for the cluster
// scope): it asks authz about every single permission the rules grant — each verb on each API group,
// resource and resource name (a rule without names meaning every object), or each verb on each
// non-resource URL — and collects those it does not allow. Wildcards are asked about as they are, so
// only a holder of the same wildcard has them. The answer is compacted for people (see Compact); an
// empty answer means u already holds everything the rules grant. The error gathers what authz
// returned along with refusals, for messages; it does not make the answer incomplete.
func MissingPermissions(ctx context.Context, authz authorizer.Authorizer, u user.Info, namespace string, rules []rbacv1.PolicyRule) ([]rbacv1.PolicyRule, error) {
	var missing []rbacv1.PolicyRule
	var errs []error
	allowed := func(attrs authorizer.AttributesRecord) bool {
		d, _, err := authz.Authorize(ctx, attrs)
		if d != authorizer.DecisionAllow && err != nil {
			errs = append(errs, err)
		}
		return d == authorizer.DecisionAllow
	}
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				if !allowed(authorizer.AttributesRecord{User: u, Verb: verb, Path: url}) {
					missing = append(missing, rbacv1.PolicyRule{Verbs: []string{verb}, NonResourceURLs: []string{url}})
				}
			}
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, group := range r.APIGroups {
				for _, resource := range r.Resources {
					res, sub, _ := strings.Cut(resource, "/")
					for _, name := range names {
						attrs := authorizer.AttributesRecord{
							User: u, Verb: verb, Namespace: namespace, APIGroup: group, APIVersion: "*",
							Resource: res, Subresource: sub, Name: name, ResourceRequest: true,
						}
						if allowed(attrs) {
							continue
						}
						p := rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource}}
						if name != "" {
							p.ResourceNames = []string{name}
						}
						missing = append(missing, p)
					}
				}
			}
		}
	}
	return Compact(missing), utilerrors.NewAggregate(errs)
}

// Compact merges rules that differ only in their verbs, then those that differ only in their resource
// names, keeping the order rules first name things in, so that a list of single permissions reads as
// few rules. It handles rules with one API group and one resource, or one non-resource URL, as
// MissingPermissions makes them; others are kept as they are.
func Compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name, url string }
	single := func(s []string) (string, bool) {
		if len(s) == 1 {
			return s[0], true
		}
		return "", len(s) == 0
	}
	var byObject []rbacv1.PolicyRule
	index := map[key]int{}
	for _, r := range rules {
		group, ok1 := single(r.APIGroups)
		resource, ok2 := single(r.Resources)
		name, ok3 := single(r.ResourceNames)
		url, ok4 := single(r.NonResourceURLs)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			byObject = append(byObject, *r.DeepCopy())
			continue
		}
		k := key{group, resource, name, url}
		i, seen := index[k]
		if !seen {
			index[k] = len(byObject)
			byObject = append(byObject, *r.DeepCopy())
			continue
		}
		for _, v := range r.Verbs {
			if !slices.Contains(byObject[i].Verbs, v) {
				byObject[i].Verbs = append(byObject[i].Verbs, v)
			}
		}
	}
	// Then the same verbs on several objects of one resource become one rule with several names.
	type namesKey struct{ group, resource, verbs string }
	var out []rbacv1.PolicyRule
	named := map[namesKey]int{}
	for _, r := range byObject {
		if len(r.ResourceNames) != 1 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := namesKey{r.APIGroups[0], r.Resources[0], strings.Join(r.Verbs, ",")}
		if i, seen := named[k]; seen {
			if !slices.Contains(out[i].ResourceNames, r.ResourceNames[0]) {
				out[i].ResourceNames = append(out[i].ResourceNames, r.ResourceNames[0])
			}
			continue
		}
		named[k] = len(out)
		out = append(out, r)
	}
	return out
}

// DescribeRule writes a rule on one line, naming only the fields it sets, the way Kubernetes' escalation
// messages do: {APIGroups:[""], Resources:["secrets"], Verbs:["get"]}.
func DescribeRule(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(field string, values []string) {
		if len(values) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", field, values))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

// EscalationError says that u tried to grant the missing rules; its message is Kubernetes': user "bob"
// (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
// followed by one line per rule, sorted.
func EscalationError(u user.Info, missing []rbacv1.PolicyRule, resolution error) error {
	lines := make([]string, 0, len(missing))
	for _, r := range missing {
		lines = append(lines, DescribeRule(r))
	}
	sort.Strings(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		u.GetName(), u.GetGroups(), strings.Join(lines, "\n"))
	if resolution != nil {
		msg += fmt.Sprintf("; resolution errors: %v", resolution)
	}
	return errors.New(msg)
}
