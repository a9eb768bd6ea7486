package binder

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// PodRequests returns what a pod asks of a node: the larger of its containers' summed requests and any
// single init container's request, plus its overhead.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addTo(sum, c.Resources.Requests)
	}
	for _, c := range pod.Spec.InitContainers {
		for name, q := range c.Resources.Requests {
			if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
				sum[name] = q.DeepCopy()
			}
		}
	}
	addTo(sum, pod.Spec.Overhead)
	return sum
}

func addTo(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur := dst[name]
		cur.Add(q)
		dst[name] = cur
	}
}

// nodeUsage is what the pods bound to a node request.
type nodeUsage struct {
	requests corev1.ResourceList
	pods     int
}

// fits returns why pod cannot go to node (empty when it can), in the scheduler's words.
func fits(pod *corev1.Pod, node *corev1.Node, used nodeUsage) []string {
	if node.Spec.Unschedulable && !tolerates(pod, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return []string{"node(s) were unschedulable"}
	}
	if !nodeReady(node) && !tolerates(pod, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}) {
		return []string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}
	}
	for _, t := range node.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerates(pod, t) {
			return []string{fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)}
		}
	}
	if !matchesNodeSelector(pod, node) {
		return []string{"node(s) didn't match Pod's node affinity/selector"}
	}
	var reasons []string
	alloc := node.Status.Allocatable
	if pods, ok := alloc[corev1.ResourcePods]; ok && int64(used.pods+1) > pods.Value() {
		reasons = append(reasons, "Too many pods")
	}
	req := PodRequests(pod)
	names := make([]string, 0, len(req))
	for name := range req {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		want := req[name]
		if want.IsZero() {
			continue
		}
		have, ok := alloc[name]
		if !ok {
			have = resource.Quantity{}
		}
		free := have.DeepCopy()
		free.Sub(used.requests[name])
		if want.Cmp(free) > 0 {
			reasons = append(reasons, "Insufficient "+n)
		}
	}
	return reasons
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tolerates reports whether one of the pod's tolerations matches the taint.
func tolerates(pod *corev1.Pod, t corev1.Taint) bool {
	for _, tol := range pod.Spec.Tolerations {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			if tol.Key == "" || tol.Key == t.Key {
				return true
			}
		default:
			if tol.Key == t.Key && tol.Value == t.Value {
				return true
			}
		}
	}
	return false
}

// matchesNodeSelector checks spec.nodeSelector and required node affinity against the node's labels.
func matchesNodeSelector(pod *corev1.Pod, node *corev1.Node) bool {
	if !labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(node.Labels)) {
		return false
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		if termMatches(term, node) {
			return true
		}
	}
	return len(terms) == 0
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	sel := labels.NewSelector()
	for _, e := range term.MatchExpressions {
		op := map[corev1.NodeSelectorOperator]selection.Operator{
			corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
			corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
			corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
		}[e.Operator]
		r, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return false
		}
		sel = sel.Add(*r)
	}
	for _, f := range term.MatchFields {
		if f.Key != "metadata.name" {
			return false
		}
		in := false
		for _, v := range f.Values {
			in = in || v == node.Name
		}
		if (f.Operator == corev1.NodeSelectorOpIn) != in {
			return false
		}
	}
	return sel.Matches(labels.Set(node.Labels))
}

// unschedulableMessage summarises why no node fits, as the scheduler does:
// "0/1 nodes are available: 1 Insufficient cpu."
func unschedulableMessage(total int, reasons map[string]int) string {
	if total == 0 {
		return "no nodes available to schedule pods"
	}
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", total, strings.Join(parts, ", "))
}
