package namespace

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
)

// content is what one pass over a namespace's objects found.
type content struct {
	// discoveryErr is set when some API groups could not be listed.
	discoveryErr error
	// failed lists the resources whose objects could not be listed or deleted, with the reason.
	failed []string
	// counts holds, per resource ("pods", "rayclusters.ray.io"), the objects still present.
	counts map[string]int
	// finalizers holds, per finalizer, the objects still present that carry it.
	finalizers map[string]int
}

func (c *content) remaining() bool { return len(c.counts) > 0 || c.discoveryErr != nil }

// deleteContent deletes every namespaced object of namespace and reports what is left.
func (r *reconciler) deleteContent(ctx context.Context, namespace string) (*content, error) {
	c := &content{counts: map[string]int{}, finalizers: map[string]int{}}
	resources, err := deletableResources(r.discovery)
	if err != nil {
		var partial *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &partial) {
			c.discoveryErr = err
			return c, fmt.Errorf("discovering resources: %w", err)
		}
		// Delete what can be found now; the failed groups are retried on the next pass.
		c.discoveryErr = err
	}
	var errs []error
	for _, res := range resources {
		if err := r.deleteResource(ctx, namespace, res, c); err != nil {
			name := resourceName(res.gvr)
			c.failed = append(c.failed, fmt.Sprintf("%s: %v", name, err))
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if c.discoveryErr != nil {
		errs = append(errs, c.discoveryErr)
	}
	return c, errors.Join(errs...)
}

// resource is one namespaced resource and whether it supports deletecollection.
type resource struct {
	gvr              schema.GroupVersionResource
	deleteCollection bool
}

// deletableResources returns the preferred version of every namespaced resource that can be listed and
// deleted.
func deletableResources(d discovery.DiscoveryInterface) ([]resource, error) {
	lists, err := d.ServerPreferredNamespacedResources()
	var out []resource
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			verbs := sets.New(r.Verbs...)
			if !verbs.Has("list") || !(verbs.Has("delete") || verbs.Has("deletecollection")) {
				continue
			}
			out = append(out, resource{gvr: gv.WithResource(r.Name), deleteCollection: verbs.Has("deletecollection")})
		}
	}
	return out, err
}

// deleteResource deletes the objects of one resource in namespace and counts those still present.
func (r *reconciler) deleteResource(ctx context.Context, namespace string, res resource, c *content) error {
	client := r.metadata.Resource(res.gvr).Namespace(namespace)
	collected := false
	if res.deleteCollection {
		err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		switch {
		case err == nil:
			collected = true
		case apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err):
			// Fall back to deleting one by one.
		default:
			return err
		}
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			// The resource went away (a CRD deleted meanwhile): nothing of it remains.
			return nil
		}
		return err
	}
	var errs []error
	for i := range list.Items {
		item := &list.Items[i]
		if !collected && item.DeletionTimestamp == nil {
			uid := item.UID
			err := client.Delete(ctx, item.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, err)
			}
		}
		// Count it even if just deleted: the next pass sees whether it is really gone.
		c.counts[resourceName(res.gvr)]++
		for _, f := range item.Finalizers {
			c.finalizers[f]++
		}
	}
	return errors.Join(errs...)
}

// resourceName names a resource as the namespace conditions do: "pods.", "rayclusters.ray.io".
func resourceName(gvr schema.GroupVersionResource) string {
	return gvr.Resource + "." + gvr.Group
}

// conditions describes the pass in the namespace conditions the real namespace controller reports.
func (c *content) conditions() []corev1.NamespaceCondition {
	cond := func(t corev1.NamespaceConditionType, bad bool, badReason, badMsg, goodReason, goodMsg string) corev1.NamespaceCondition {
		if bad {
			return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: badReason, Message: badMsg}
		}
		return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: goodReason, Message: goodMsg}
	}
	var discoveryMsg string
	if c.discoveryErr != nil {
		discoveryMsg = "Discovery failed for some groups: " + c.discoveryErr.Error()
	}
	return []corev1.NamespaceCondition{
		cond(corev1.NamespaceDeletionDiscoveryFailure, c.discoveryErr != nil,
			"DiscoveryFailed", discoveryMsg, "ResourcesDiscovered", "All resources successfully discovered"),
		cond(corev1.NamespaceDeletionGVParsingFailure, false,
			"", "", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
		cond(corev1.NamespaceDeletionContentFailure, len(c.failed) > 0,
			"ContentDeletionFailed", fmt.Sprintf("Failed to delete all resource types, %d remaining: %s", len(c.failed), strings.Join(c.failed, ", ")),
			"ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
		cond(corev1.NamespaceContentRemaining, len(c.counts) > 0,
			"SomeResourcesRemain", "Some resources are remaining: "+countList(c.counts, "has %d resource instances"),
			"ContentRemoved", "All content successfully removed"),
		cond(corev1.NamespaceFinalizersRemaining, len(c.finalizers) > 0,
			"SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: "+countList(c.finalizers, "in %d resource instances"),
			"ContentHasNoFinalizers", "All content-preserving finalizers finished"),
	}
}

// countList prints counts as "a has 1 resource instances, b has 2 resource instances", sorted by key.
func countList(counts map[string]int, format string) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + fmt.Sprintf(format, counts[k])
	}
	return strings.Join(parts, ", ")
}
