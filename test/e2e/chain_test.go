package e2e

// The trigger chain as `rayctl trace` shows it: every hop from the kubelet's write that made the head
// Pod ready to the RayJob controller's submission to the dashboard, in causal order.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
)

// hopPattern matches one step of a trace.
type hopPattern struct {
	component string
	hop       chain.Hop
	kind      string
	// detail, when set, must occur in what the step did, as rayctl trace says it.
	detail string
}

func (p hopPattern) match(s *chain.Step) bool {
	return s.Component == p.component && s.Hop == p.hop && strings.EqualFold(s.Object.Kind, p.kind) &&
		(p.detail == "" || strings.Contains(render.Describe(&s.Event), p.detail))
}

// matchInOrder reports how many of want match steps in order, and the steps one a line.
func matchInOrder(steps []chain.Step, want []hopPattern) (int, string) {
	var lines strings.Builder
	i := 0
	for si := range steps {
		s := &steps[si]
		fmt.Fprintf(&lines, "  #%d cause=%d %s %s: %s\n", s.Seq, s.Cause, s.Component, s.Hop, render.Describe(&s.Event))
		if i < len(want) && want[i].match(s) {
			i++
		}
	}
	return i, lines.String()
}

func (p hopPattern) String() string {
	return fmt.Sprintf("%s %s %s %q", p.component, p.hop, p.kind, p.detail)
}

// testJobTrace: `rayctl trace rayjob/NAME -o json` lists, in order, the hops from the head Pod's Ready
// write to the submission, each linked to the one before it.
func testJobTrace(t *testing.T, e *rayEnv) {
	job := rayJobFromSample(t, "rayjob-http.yaml", "traced")
	_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)
	e.waitJobFinished(t, "traced")

	out, err := e.in.Rayctl(e.ctx, "trace", "rayjob/traced", "-n", e.ns, "-o", "json")
	must(t, "rayctl trace", err)
	var steps []chain.Step
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		t.Fatalf("rayctl trace -o json: %v\n%s", err, out)
	}
	want := []hopPattern{
		{"kubelet", chain.KubeletWrite, "Pod", "Ready=True"},
		{"apiserver", chain.APIWrite, "Pod", "patch status"},
		{"raycluster", chain.InformerEvent, "Pod", "update"},
		{"raycluster", chain.MapHop, "Pod", "controller owner"},
		{"raycluster", chain.EnqueueHop, "RayCluster", ""},
		{"raycluster", chain.DequeueHop, "RayCluster", ""},
		{"raycluster", chain.ReconcileStart, "RayCluster", ""},
		{"raycluster", chain.StatusWrite, "RayCluster", "state=ready"},
		{"apiserver", chain.APIWrite, "RayCluster", "update status"},
		{"rayjob", chain.InformerEvent, "RayCluster", "update"},
		{"rayjob", chain.MapHop, "RayCluster", "controller owner"},
		{"rayjob", chain.EnqueueHop, "RayJob", ""},
		{"rayjob", chain.DequeueHop, "RayJob", ""},
		{"rayjob", chain.ReconcileStart, "RayJob", ""},
		{"rayjob", chain.StatusWrite, "RayJob", "jobDeploymentStatus=Running"},
		{"rayjob", chain.DashboardCall, "RayJob", "POST "},
	}
	bySeq := map[uint64]*chain.Step{}
	for i := range steps {
		bySeq[steps[i].Seq] = &steps[i]
	}
	var lines strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&lines, "  #%d cause=%d %s %s: %s\n", s.Seq, s.Cause, s.Component, s.Hop, render.Describe(&s.Event))
	}
	i := 0
	var prev *chain.Step
	for si := range steps {
		s := &steps[si]
		if i < len(want) && want[i].match(s) {
			if prev != nil && s.At < prev.At {
				t.Errorf("%s placed before %s", want[i], want[i-1])
			}
			prev = s
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("the trace lacks, in order, %s (matched %d of %d hops); trace:\n%s", want[i], i, len(want), lines.String())
	}
	// The submission links back, cause by cause, to a kubelet write (a queue entry may merge several
	// adds, so every cause is followed, not only the primary one).
	var submission *chain.Step
	for i := range steps {
		if want[len(want)-1].match(&steps[i]) {
			submission = &steps[i]
		}
	}
	seen := map[uint64]bool{submission.Seq: true}
	queue := []*chain.Step{submission}
	var write *chain.Step
	for len(queue) > 0 && write == nil {
		s := queue[0]
		queue = queue[1:]
		for _, c := range s.Causes {
			cs, ok := bySeq[c]
			if !ok {
				t.Fatalf("step #%d names cause #%d, which is not in the trace", s.Seq, c)
			}
			if seen[c] {
				continue
			}
			seen[c] = true
			if cs.Hop == chain.KubeletWrite {
				write = cs
				break
			}
			queue = append(queue, cs)
		}
	}
	if write == nil {
		t.Fatalf("no chain of causes leads from the submission back to a kubelet write; trace:\n%s", lines.String())
	}
	t.Logf("kubelet write → submission: %d hops in the trace, %.1f ms", len(steps), float64(time.Duration(submission.At-write.At))/1e6)

	text, err := e.in.Rayctl(e.ctx, "trace", "rayjob/traced", "-n", e.ns)
	must(t, "rayctl trace", err)
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
}
