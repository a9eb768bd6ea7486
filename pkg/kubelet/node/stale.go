package node

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// RemoveStale deletes the Nodes an earlier `rayctl up` registered (RegisteredAnnotation) that are not
// among serving, and the pods bound to them, at once, as kube-controller-manager's pod garbage collector
// deletes the pods of a node that is gone: no kubelet will run them, and their controllers make new ones
// that the scheduler places on the nodes there are. It returns what it removed, one line per node.
func RemoveStale(ctx context.Context, client kubernetes.Interface, serving []string) ([]string, error) {
	keep := map[string]bool{}
	for _, n := range serving {
		keep[n] = true
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, n := range nodes.Items {
		if keep[n.Name] || n.Annotations[RegisteredAnnotation] != "true" {
			continue
		}
		if err := client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return removed, fmt.Errorf("removing node %s: %w", n.Name, err)
		}
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
		if err != nil {
			return removed, err
		}
		for _, p := range pods.Items {
			err := client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
				Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return removed, fmt.Errorf("removing pod %s/%s of node %s: %w", p.Namespace, p.Name, n.Name, err)
			}
		}
		removed = append(removed, fmt.Sprintf("node %s (no longer given) and its %d pod(s)", n.Name, len(pods.Items)))
	}
	return removed, nil
}
