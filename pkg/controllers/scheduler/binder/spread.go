package binder

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// What kube-scheduler's PodTopologySpread filter says of a node it refuses.
const (
	reasonSpread             = "node(s) didn't match pod topology spread constraints"
	reasonSpreadMissingLabel = reasonSpread + " (missing required label)"
)

// spreadConstraint is one of the pod's topology spread constraints with its selector worked out
// (labelSelector and the pod's values of matchLabelKeys), and how many of the pods counted against
// each node it selects.
type spreadConstraint struct {
	corev1.TopologySpreadConstraint
	selector labels.Selector
	// onNode is, by node name, how many pods of the pod's namespace the selector matches there.
	onNode map[string]int
	// selfMatch says whether the selector matches the pod itself.
	selfMatch bool
}

// spreadState is what PodTopologySpread works out once per placement: the DoNotSchedule constraints
// with the matching pods per domain and the fewest in any domain, and the ScheduleAnyway constraints.
type spreadState struct {
	hard, soft []spreadConstraint
	// domains holds, per hard constraint, the matching pods of each topology value among the nodes
	// it counts (nodes with every hard constraint's key that pass its inclusion policies).
	domains []map[string]int
}

// hasHardSpread reports whether pod has a DoNotSchedule topology spread constraint.
func hasHardSpread(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	return false
}

// spread builds the placement's spreadState over every node (nil when the pod has no constraints).
func (p *placement) spread(nodes []corev1.Node) *spreadState {
	if len(p.pod.Spec.TopologySpreadConstraints) == 0 {
		return nil
	}
	s := &spreadState{}
	for _, c := range p.pod.Spec.TopologySpreadConstraints {
		sc := spreadConstraint{TopologySpreadConstraint: c, selector: p.spreadSelector(c), onNode: map[string]int{}}
		sc.selfMatch = sc.selector.Matches(labels.Set(p.pod.Labels))
		for _, o := range p.others {
			if o.namespace == p.pod.Namespace && sc.selector.Matches(labels.Set(o.labels)) {
				sc.onNode[o.node]++
			}
		}
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			s.hard = append(s.hard, sc)
		} else {
			s.soft = append(s.soft, sc)
		}
	}
	s.domains = make([]map[string]int, len(s.hard))
	for i := range s.domains {
		s.domains[i] = map[string]int{}
	}
	for i := range nodes {
		n := &nodes[i]
		if !hasKeys(n, s.hard) {
			continue
		}
		for j, c := range s.hard {
			if p.includes(&c, n) {
				s.domains[j][n.Labels[c.TopologyKey]] += c.onNode[n.Name]
			}
		}
	}
	return s
}

// spreadSelector is c's label selector, narrowed by the pod's own values of c's matchLabelKeys (as
// kube-scheduler narrows it; an API server that merged them already gives the same selector).
func (p *placement) spreadSelector(c corev1.TopologySpreadConstraint) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil {
		return labels.Nothing()
	}
	for _, key := range c.MatchLabelKeys {
		if v, ok := p.pod.Labels[key]; ok {
			if r, err := labels.NewRequirement(key, selection.In, []string{v}); err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	return sel
}

// hasKeys reports whether node has the topology key of every constraint of cs.
func hasKeys(node *corev1.Node, cs []spreadConstraint) bool {
	for _, c := range cs {
		if _, ok := node.Labels[c.TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// includes reports whether c counts the pods of node, by its nodeAffinityPolicy (default Honor: the
// node must match the pod's nodeSelector and required node affinity) and nodeTaintsPolicy (default
// Ignore; Honor: the pod must tolerate the node's NoSchedule and NoExecute taints).
func (p *placement) includes(c *spreadConstraint, node *corev1.Node) bool {
	if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		if ok, _ := p.required.Match(node); !ok {
			return false
		}
	}
	if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, p.pod.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
			return false
		}
	}
	return true
}

// fit checks the DoNotSchedule constraints against node, as PodTopologySpread's filter does: the node
// must have each constraint's topology key, and placing the pod in its domain must keep the domain
// within maxSkew of the domain with the fewest matching pods (0 while there are fewer domains than
// minDomains). It returns the reason the node is refused, or "".
func (s *spreadState) fit(pod *corev1.Pod, node *corev1.Node) string {
	if s == nil {
		return ""
	}
	for i, c := range s.hard {
		value, ok := node.Labels[c.TopologyKey]
		if !ok {
			return reasonSpreadMissingLabel
		}
		if len(s.domains[i]) == 0 {
			continue
		}
		fewest := math.MaxInt
		for _, n := range s.domains[i] {
			fewest = min(fewest, n)
		}
		if c.MinDomains != nil && len(s.domains[i]) < int(*c.MinDomains) {
			fewest = 0
		}
		self := 0
		if c.selfMatch {
			self = 1
		}
		if s.domains[i][value]+self-fewest > int(c.MaxSkew) {
			return reasonSpread
		}
	}
	return ""
}

// scores sets the PodTopologySpread score of each fitting node by the ScheduleAnyway constraints, as
// kube-scheduler scores them: a node's raw score sums, per constraint, the matching pods in its domain
// weighed by log(domains+2), plus maxSkew-1; fewer is better. A fitting node without every
// constraint's key is left out (spreadIgnored). nodes are all the nodes, fit the fitting ones.
func (s *spreadState) scores(p *placement, nodes []corev1.Node, fit []*corev1.Node, all []scores) {
	if s == nil || len(s.soft) == 0 {
		return
	}
	pairs := make([]map[string]int, len(s.soft))
	weights := make([]float64, len(s.soft))
	scored := 0
	for i, n := range fit {
		if !hasKeys(n, s.soft) {
			all[i].spreadIgnored = true
			continue
		}
		scored++
		for j, c := range s.soft {
			if pairs[j] == nil {
				pairs[j] = map[string]int{}
			}
			pairs[j][n.Labels[c.TopologyKey]] += 0
		}
	}
	for j, c := range s.soft {
		size := len(pairs[j])
		if c.TopologyKey == corev1.LabelHostname {
			size = scored
		}
		weights[j] = math.Log(float64(size + 2))
	}
	for i := range nodes {
		n := &nodes[i]
		if !hasKeys(n, s.soft) {
			continue
		}
		for j, c := range s.soft {
			if c.TopologyKey == corev1.LabelHostname || !p.includes(&c, n) {
				continue
			}
			if _, ok := pairs[j][n.Labels[c.TopologyKey]]; ok {
				pairs[j][n.Labels[c.TopologyKey]] += c.onNode[n.Name]
			}
		}
	}
	for i, n := range fit {
		if all[i].spreadIgnored {
			continue
		}
		var raw float64
		for j, c := range s.soft {
			count := pairs[j][n.Labels[c.TopologyKey]]
			if c.TopologyKey == corev1.LabelHostname {
				count = c.onNode[n.Name]
			}
			raw += float64(count)*weights[j] + float64(c.MaxSkew-1)
		}
		all[i].spread = int64(math.Round(raw))
		all[i].spreadScored = true
	}
}

// spreadScores normalises the raw PodTopologySpread scores of all to 0–100 as kube-scheduler does: the
// fewest matching pods scores highest, nodes left out score 0, and all score 100 when every raw score
// is 0.
func spreadScores(all []scores) []int64 {
	out := make([]int64, len(all))
	lo, hi, any := int64(math.MaxInt64), int64(0), false
	for _, s := range all {
		if s.spreadScored {
			lo, hi, any = min(lo, s.spread), max(hi, s.spread), true
		}
	}
	if !any {
		return out
	}
	for i, s := range all {
		switch {
		case !s.spreadScored:
		case hi == 0:
			out[i] = 100
		default:
			out[i] = 100 * (hi + lo - s.spread) / hi
		}
	}
	return out
}
