package binder

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
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

// placedPod is what inter-pod affinity reads of a pod counted against a node.
type placedPod struct {
	node, namespace string
	labels          map[string]string
	affinity        *corev1.Affinity
}

// The reasons a node refuses a pod, in kube-scheduler's words. Those marked unresolvable are ones no
// preemption could cure (kube-scheduler's UnschedulableAndUnresolvable).
const (
	reasonUnschedulable       = "node(s) were unschedulable"
	reasonNodeAffinity        = "node(s) didn't match Pod's node affinity/selector"
	reasonPodAffinity         = "node(s) didn't match pod affinity rules"
	reasonPodAntiAffinity     = "node(s) didn't match pod anti-affinity rules"
	reasonExistingAntiAffinty = "node(s) didn't satisfy existing pods anti-affinity rules"
	reasonTooManyPods         = "Too many pods"
)

// unresolvable reports whether reason is one preemption cannot cure.
func unresolvable(reason string) bool {
	return reason == reasonUnschedulable || reason == reasonNodeAffinity || reason == reasonPodAffinity ||
		reason == reasonSpreadMissingLabel || strings.HasPrefix(reason, "node(s) had untolerated taint")
}

// placement is what one pod's placement reads: the pod, every node, and the pods counted against them.
type placement struct {
	pod      *corev1.Pod
	required nodeaffinity.RequiredNodeAffinity
	// nodeLabels are the nodes' labels by name (the topology domains of pod affinity).
	nodeLabels map[string]map[string]string
	// others are the pods counted against nodes; namespaceLabels the labels of namespaces by name, for
	// affinity terms' namespaceSelector.
	others          []placedPod
	namespaceLabels func(string) map[string]string
	// req is the pod's PodRequests, worked out on first use.
	req corev1.ResourceList
	// spreadState is the pod's topology spread constraints worked out over every node (nil: none).
	spreadState *spreadState
}

// requests is what the pod asks of a node (PodRequests), worked out once per placement.
func (p *placement) requests() corev1.ResourceList {
	if p.req == nil {
		p.req = PodRequests(p.pod)
	}
	return p.req
}

// choose returns the best-scoring node that fits, or "" with, per reason, how many nodes refused and how
// many of them for a reason no preemption could cure.
func (p *placement) choose(nodes []corev1.Node, usage func(string) nodeUsage) (node string, reasons map[string]int, unhelpful int) {
	reasons = map[string]int{}
	var fit []*corev1.Node
	var all []scores
	p.spreadState = p.spread(nodes)
	for i := range nodes {
		n := &nodes[i]
		used := usage(n.Name)
		if why := p.fits(n, used); len(why) > 0 {
			for _, r := range why {
				reasons[r]++
			}
			if unresolvable(why[0]) {
				unhelpful++
			}
			continue
		}
		fit = append(fit, n)
		all = append(all, p.score(n, used))
	}
	if len(fit) == 0 {
		return "", reasons, unhelpful
	}
	p.spreadState.scores(p, nodes, fit, all)
	return fit[best(all)].Name, nil, 0
}

// fits returns why the pod cannot go to node (empty when it can), in the scheduler's words, checked in
// kube-scheduler's filter order: unschedulable, taints, node affinity, resources, topology spread, pod
// affinity.
func (p *placement) fits(node *corev1.Node, used nodeUsage) []string {
	pod := p.pod
	if node.Spec.Unschedulable && !tolerates(pod, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return []string{reasonUnschedulable}
	}
	taints := node.Spec.Taints
	if !nodeReady(node) {
		taints = append([]corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}, taints...)
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); untolerated {
		return []string{fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)}
	}
	if ok, _ := p.required.Match(node); !ok {
		return []string{reasonNodeAffinity}
	}
	if why := resourceFit(p.requests(), node, used); len(why) > 0 {
		return why
	}
	if why := p.spreadState.fit(pod, node); why != "" {
		return []string{why}
	}
	if why := p.podAffinityFit(node); why != "" {
		return []string{why}
	}
	return nil
}

// resourceFit returns the resources of req the node lacks ("Insufficient nvidia.com/gpu"), as
// kube-scheduler's NodeResourcesFit says it, extended resources included.
func resourceFit(req corev1.ResourceList, node *corev1.Node, used nodeUsage) []string {
	var reasons []string
	alloc := node.Status.Allocatable
	if pods, ok := alloc[corev1.ResourcePods]; ok && int64(used.pods+1) > pods.Value() {
		reasons = append(reasons, reasonTooManyPods)
	}
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
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &t, false)
}

// termMatches reports whether other, of namespace otherNS, is among the pods term selects for a pod of
// namespace ownerNS.
func (p *placement) termMatches(term *corev1.PodAffinityTerm, ownerNS string, otherNS string, otherLabels map[string]string) bool {
	inNamespace := false
	switch {
	case len(term.Namespaces) == 0 && term.NamespaceSelector == nil:
		inNamespace = otherNS == ownerNS
	default:
		for _, ns := range term.Namespaces {
			inNamespace = inNamespace || ns == otherNS
		}
		if !inNamespace && term.NamespaceSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
			inNamespace = err == nil && (sel.Empty() || sel.Matches(labels.Set(p.namespaceLabels(otherNS))))
		}
	}
	if !inNamespace {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	return err == nil && sel.Matches(labels.Set(otherLabels))
}

// sameDomain reports whether nodes a and b share the value of topology key (both must have it).
func (p *placement) sameDomain(key, a, b string) bool {
	va, okA := p.nodeLabels[a][key]
	vb, okB := p.nodeLabels[b][key]
	return okA && okB && va == vb
}

// podAffinityFit checks the pod's required pod affinity and anti-affinity, and the existing pods'
// required anti-affinity, against node ("" when they hold).
func (p *placement) podAffinityFit(node *corev1.Node) string {
	pod := p.pod
	// Existing pods that must not share a domain with a pod like this one.
	for _, o := range p.others {
		if o.affinity == nil || o.affinity.PodAntiAffinity == nil {
			continue
		}
		for i := range o.affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			term := &o.affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
			if p.sameDomain(term.TopologyKey, node.Name, o.node) && p.termMatches(term, o.namespace, pod.Namespace, pod.Labels) {
				return reasonExistingAntiAffinty
			}
		}
	}
	aff := pod.Spec.Affinity
	if aff == nil {
		return ""
	}
	if aff.PodAffinity != nil {
		for i := range aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			term := &aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
			if _, ok := node.Labels[term.TopologyKey]; !ok {
				return reasonPodAffinity
			}
			found, anywhere := false, false
			for _, o := range p.others {
				if !p.termMatches(term, pod.Namespace, o.namespace, o.labels) {
					continue
				}
				anywhere = true
				if p.sameDomain(term.TopologyKey, node.Name, o.node) {
					found = true
					break
				}
			}
			// The first pod of a group that selects itself may go anywhere its topology key is.
			if !found && (anywhere || !p.termMatches(term, pod.Namespace, pod.Namespace, pod.Labels)) {
				return reasonPodAffinity
			}
		}
	}
	if aff.PodAntiAffinity != nil {
		for i := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			term := &aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
			for _, o := range p.others {
				if p.sameDomain(term.TopologyKey, node.Name, o.node) && p.termMatches(term, pod.Namespace, o.namespace, o.labels) {
					return reasonPodAntiAffinity
				}
			}
		}
	}
	return ""
}

// scores are a fitting node's raw scores, normalised across the fitting nodes by score.
type scores struct {
	nodeAffinity, untoleratedPrefer, podAffinity int64
	// leastAllocated is 0–100: the share of cpu and memory the node has left once the pod is there.
	leastAllocated int64
	// spread is the raw topology spread score (fewer matching pods is better), when spreadScored; a
	// node without the keys of the ScheduleAnyway constraints is spreadIgnored.
	spread                      int64
	spreadScored, spreadIgnored bool
}

// score computes node's raw scores for the pod, as kube-scheduler's NodeAffinity, TaintToleration,
// InterPodAffinity and NodeResourcesFit (LeastAllocated) score plugins do.
func (p *placement) score(node *corev1.Node, used nodeUsage) scores {
	pod := p.pod
	var s scores
	if aff := pod.Spec.Affinity; aff != nil && aff.NodeAffinity != nil && len(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		if terms, err := nodeaffinity.NewPreferredSchedulingTerms(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err == nil {
			s.nodeAffinity = terms.Score(node)
		}
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, t, false) {
			s.untoleratedPrefer++
		}
	}
	if aff := pod.Spec.Affinity; aff != nil {
		weigh := func(terms []corev1.WeightedPodAffinityTerm, sign int64) {
			for i := range terms {
				term := &terms[i].PodAffinityTerm
				for _, o := range p.others {
					if p.sameDomain(term.TopologyKey, node.Name, o.node) && p.termMatches(term, pod.Namespace, o.namespace, o.labels) {
						s.podAffinity += sign * int64(terms[i].Weight)
					}
				}
			}
		}
		if aff.PodAffinity != nil {
			weigh(aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
		}
		if aff.PodAntiAffinity != nil {
			weigh(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, -1)
		}
	}
	req := p.requests()
	var sum, n int64
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		alloc := node.Status.Allocatable[name]
		if alloc.IsZero() {
			continue
		}
		want := used.requests[name]
		want.Add(req[name])
		free := alloc.MilliValue() - want.MilliValue()
		if free < 0 {
			free = 0
		}
		sum += free * 100 / alloc.MilliValue()
		n++
	}
	if n > 0 {
		s.leastAllocated = sum / n
	}
	return s
}

// best returns the index of the best-scoring node, normalising each score across the nodes and weighing
// them as kube-scheduler's default profile does (TaintToleration 3, NodeAffinity 2, PodTopologySpread 2,
// InterPodAffinity 2, NodeResourcesFit 1). A tie goes to the earlier node.
func best(all []scores) int {
	spread := spreadScores(all)
	var maxAff, maxTaint, minPod, maxPod int64
	for i, s := range all {
		maxAff = max(maxAff, s.nodeAffinity)
		maxTaint = max(maxTaint, s.untoleratedPrefer)
		if i == 0 || s.podAffinity < minPod {
			minPod = s.podAffinity
		}
		if i == 0 || s.podAffinity > maxPod {
			maxPod = s.podAffinity
		}
	}
	bestI, bestTotal := -1, int64(0)
	for i, s := range all {
		var aff, taint, pod int64
		if maxAff > 0 {
			aff = s.nodeAffinity * 100 / maxAff
		}
		taint = 100
		if maxTaint > 0 {
			taint = 100 - s.untoleratedPrefer*100/maxTaint
		}
		if maxPod > minPod {
			pod = (s.podAffinity - minPod) * 100 / (maxPod - minPod)
		}
		total := 3*taint + 2*aff + 2*spread[i] + 2*pod + s.leastAllocated
		if bestI < 0 || total > bestTotal {
			bestI, bestTotal = i, total
		}
	}
	return bestI
}

// unschedulableMessage summarises why no node fits, as kube-scheduler does, its preemption's part
// included (rayctl preempts nothing: a node short of resources has no victims to offer):
// "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint
// {nvidia.com/gpu: present}. preemption: 0/2 nodes are available: 1 No preemption victims found for
// incoming pod, 1 Preemption is not helpful for scheduling."
func unschedulableMessage(total int, reasons map[string]int, unhelpful int) string {
	if total == 0 {
		return "no nodes available to schedule pods"
	}
	msg := fmt.Sprintf("0/%d nodes are available: %s.", total, histogram(reasons))
	post := map[string]int{}
	if n := total - unhelpful; n > 0 {
		post["No preemption victims found for incoming pod"] = n
	}
	if unhelpful > 0 {
		post["Preemption is not helpful for scheduling"] = unhelpful
	}
	return msg + fmt.Sprintf(" preemption: 0/%d nodes are available: %s.", total, histogram(post))
}

// histogram is "2 reason, 1 other reason", sorted as kube-scheduler sorts it.
func histogram(reasons map[string]int) string {
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
