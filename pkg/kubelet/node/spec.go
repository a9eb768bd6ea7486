package node

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Spec is one node as `rayctl up` describes it: its name, what it advertises instead of the host's
// measure (empty: the host's), and the labels and taints it registers with.
type Spec struct {
	Name     string
	Capacity corev1.ResourceList
	Labels   map[string]string
	Taints   []corev1.Taint
	// Simulated nodes run their pods without a process (kwok's idea): Running and Ready on a schedule.
	Simulated bool
}

// SimulatedLabel marks a simulated node (value "true").
const SimulatedLabel = "rayctl.io/simulated"

// Specs builds the nodes of `rayctl up`: first (named by --node-name, sized by --node-capacity) and one
// per --node value ("NAME" or "NAME:cpu=4,nvidia.com/gpu=1"), then adds each --node-labels value
// ("NAME:key=value,key2=value2", as kubectl label spells them) and --node-taints value
// ("NAME:key=value:NoSchedule,key2:NoExecute", as kubectl taint spells them) to the node it names.
// simulated ("COUNT" or "COUNT:cpu=32,memory=128Gi", "" for none) adds that many simulated nodes,
// sim-001, sim-002, …, labelled SimulatedLabel=true. An error names the flag and the value at fault.
func Specs(first string, firstCapacity map[string]string, nodes, nodeLabels, nodeTaints []string, simulated string) ([]Spec, error) {
	capacity, err := ParseCapacity(firstCapacity)
	if err != nil {
		return nil, fmt.Errorf("--node-capacity %w", err)
	}
	out := []Spec{{Name: first, Capacity: capacity}}
	index := map[string]int{first: 0}
	for _, v := range nodes {
		name, rest, _ := strings.Cut(v, ":")
		if err := validName(name); err != nil {
			return nil, fmt.Errorf("--node %q: %w", v, err)
		}
		if _, dup := index[name]; dup {
			return nil, fmt.Errorf("--node %q: node %q is given twice", v, name)
		}
		kv, err := splitPairs(rest)
		if err != nil {
			return nil, fmt.Errorf("--node %q: %w", v, err)
		}
		c, err := ParseCapacity(kv)
		if err != nil {
			return nil, fmt.Errorf("--node %q: %w", v, err)
		}
		index[name] = len(out)
		out = append(out, Spec{Name: name, Capacity: c})
	}
	if simulated != "" {
		count, rest, _ := strings.Cut(simulated, ":")
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 || n > maxSimulated {
			return nil, fmt.Errorf("--simulated-nodes %q: want COUNT (0 to %d) or COUNT:cpu=32,memory=128Gi", simulated, maxSimulated)
		}
		kv, err := splitPairs(rest)
		if err != nil {
			return nil, fmt.Errorf("--simulated-nodes %q: %w", simulated, err)
		}
		c, err := ParseCapacity(kv)
		if err != nil {
			return nil, fmt.Errorf("--simulated-nodes %q: %w", simulated, err)
		}
		for i := 1; i <= n; i++ {
			name := fmt.Sprintf("sim-%03d", i)
			if _, dup := index[name]; dup {
				return nil, fmt.Errorf("--simulated-nodes %q: node %s is given by --node too", simulated, name)
			}
			index[name] = len(out)
			out = append(out, Spec{Name: name, Capacity: c.DeepCopy(), Labels: map[string]string{SimulatedLabel: "true"}, Simulated: true})
		}
	}
	named := func(flag, v string) (*Spec, string, error) {
		name, rest, ok := strings.Cut(v, ":")
		if !ok {
			return nil, "", fmt.Errorf("%s %q: want NAME:..., the node's name first", flag, v)
		}
		i, known := index[name]
		if !known {
			return nil, "", fmt.Errorf("%s %q: no node %q (the nodes are %s)", flag, v, name, strings.Join(names(out), ", "))
		}
		return &out[i], rest, nil
	}
	for _, v := range nodeLabels {
		s, rest, err := named("--node-labels", v)
		if err != nil {
			return nil, err
		}
		set, err := labels.ConvertSelectorToLabelsMap(rest)
		if err != nil {
			return nil, fmt.Errorf("--node-labels %q: %w", v, err)
		}
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		for k, val := range set {
			s.Labels[k] = val
		}
	}
	for _, v := range nodeTaints {
		s, rest, err := named("--node-taints", v)
		if err != nil {
			return nil, err
		}
		for _, t := range strings.Split(rest, ",") {
			taint, err := ParseTaint(t)
			if err != nil {
				return nil, fmt.Errorf("--node-taints %q: %w", v, err)
			}
			for _, have := range s.Taints {
				if have.Key == taint.Key && have.Effect == taint.Effect {
					return nil, fmt.Errorf("--node-taints %q: taint %s:%s is given twice", v, taint.Key, taint.Effect)
				}
			}
			s.Taints = append(s.Taints, taint)
		}
	}
	return out, nil
}

// maxSimulated bounds --simulated-nodes.
const maxSimulated = 5000

func names(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	sort.Strings(out)
	return out
}

func validName(name string) error {
	if name == "" {
		return fmt.Errorf("want NAME or NAME:cpu=4,memory=16Gi,nvidia.com/gpu=1")
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%q is not a node name: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// splitPairs reads "k=v,k2=v2" (empty: none).
func splitPairs(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, p := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q: want resource=quantity", p)
		}
		out[k] = v
	}
	return out, nil
}

// ParseTaint reads one taint as kubectl taint spells it: key=value:Effect or key:Effect, the effect
// one of NoSchedule, PreferNoSchedule and NoExecute.
func ParseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key=value:Effect or key:Effect", s)
	}
	t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q: effect %q is none of NoSchedule, PreferNoSchedule, NoExecute", s, effect)
	}
	t.Key, t.Value, _ = strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: key %q: %s", s, t.Key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: value %q: %s", s, t.Value, strings.Join(errs, "; "))
	}
	return t, nil
}
