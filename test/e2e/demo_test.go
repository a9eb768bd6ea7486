package e2e

// `rayctl demo` as a workshop runs it: against a running rayctl, it applies the sample RayJob, streams
// the trigger chain, and ends with the hop-latency table and the job's result.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// demoStreamIndent is how far RenderLine indents a wrapped line (offset, latency, component columns).
const demoStreamIndent = 34

// TestDemo runs `rayctl demo` on an instance of its own (the Ray tests' reasons apply: its pods take the
// node's CPU) and checks, in order, the key hops of the live stream, the rows of the latency table along
// the causal line from the head Pod's Ready write to the submission, and the job's result; every line fits
// 80 columns and, not being a terminal, carries no colour; the RayJob is deleted at the end.
func TestDemo(t *testing.T) {
	t.Parallel()
	in, err := framework.Start("")
	if err != nil {
		t.Fatalf("starting rayctl: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()

	out, err := in.Rayctl(ctx, "demo")
	t.Logf("rayctl demo:\n%s", out)
	must(t, "rayctl demo", err)

	for i, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line %d has %d columns: %q", i+1, n, l)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("colour escapes in output that is not a terminal")
	}

	// The live stream, one logical line per hop (wrapped lines joined), then the table and the result.
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if len(lines) > 0 && len(l) > demoStreamIndent && strings.TrimSpace(l[:demoStreamIndent]) == "" {
			lines[len(lines)-1] += " " + strings.TrimSpace(l)
			continue
		}
		lines = append(lines, l)
	}
	type want struct {
		what string
		all  []string // every one must occur in the line
	}
	wants := []want{
		{"the RayJob applied", []string{"apiserver", "accepted create of RayJob rayjob-http-"}},
		{"the RayCluster created", []string{"accepted create of RayCluster rayjob-http-"}},
		{"the head Pod created", []string{"accepted create of Pod rayjob-http-"}},
		{"the kubelet's Ready write", []string{"kubelet", "wrote Pod", "Ready=True"}},
		{"the API accepting it", []string{"apiserver", "accepted patch status of Pod"}},
		{"the RayCluster controller's informer", []string{"raycluster", "informer: update Pod"}},
		{"the mapping to the RayCluster", []string{"raycluster", "mapped Pod", "(controller owner)"}},
		{"the RayCluster ready", []string{"raycluster", "wrote RayCluster", "state=ready"}},
		{"the RayJob controller's informer", []string{"rayjob", "informer: update RayCluster"}},
		{"the RayJob Running", []string{"rayjob", "moved Initializing → Running"}},
		{"the submission", []string{"rayjob", "dashboard POST", "→ 200"}},
		{"the RayJob Complete", []string{"rayjob", "moved Running → Complete"}},
		{"the table", []string{"Hop latencies, head Pod Ready → job submitted"}},
		{"the table's root", []string{"kubelet wrote Pod status (Ready=True)", "kubelet"}},
		{"kubelet → API", []string{"kubelet → API accepted (Pod status)", "apiserver", " ms"}},
		{"API → informer", []string{"API → raycluster informer (Pod update)", " ms"}},
		{"informer → enqueue", []string{"informer → enqueue (RayCluster)", " ms"}},
		{"queue wait", []string{"queue wait → Reconcile RayCluster", " ms"}},
		{"Reconcile → status write", []string{"Reconcile → status write (ready)", " ms"}},
		{"the status write accepted", []string{"status write → API accepted (RayCluster)", " ms"}},
		{"RayCluster status → RayJob informer", []string{"API → rayjob informer (RayCluster update)", " ms"}},
		{"the POST sent", []string{"Reconcile → POST /api/jobs/ sent", " ms"}},
		{"the POST latency", []string{"POST latency (200)", " ms"}},
		{"the chain's total", []string{"head Pod Ready → job submitted:", "ms over", "hops"}},
		{"the result", []string{"Complete, jobStatus SUCCEEDED"}},
		{"the job's logs", []string{"hello from ray job"}},
		{"the total time", []string{"apply → Complete in", " s"}},
		{"the clean-up", []string{"deleted RayJob demo/rayjob-http-"}},
	}
	i := 0
	for _, l := range lines {
		if i == len(wants) {
			break
		}
		ok := true
		for _, s := range wants[i].all {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			i++
		}
	}
	if i < len(wants) {
		t.Fatalf("the output lacks, after %d expected lines in order, %s (a line with %q)", i, wants[i].what, wants[i].all)
	}

	// The RayJob is deleted (its finalizer may take a moment).
	gone := false
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		stdout, stderr, err := in.Kubectl(ctx, "", "get", "rayjobs", "-n", "demo", "-o", "name")
		if err != nil {
			t.Fatalf("kubectl get rayjobs: %v\n%s", err, stderr)
		}
		if strings.TrimSpace(stdout) == "" {
			gone = true
			break
		}
	}
	if !gone {
		t.Error("the demo's RayJob is still there after the demo")
	}
}
