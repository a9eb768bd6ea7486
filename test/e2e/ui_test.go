package e2e

// `rayctl ui` in a real headless browser (Debian's chromium, driven over the DevTools protocol by
// chromedp): the page opens with its token and nothing opens without it, a RayJob's trigger chain
// appears hop by hop in the sequence diagram while the job runs, and a stuck RayJob shows the
// diagnosis's verdict.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// uiTimeout bounds each wait on the page: a RayJob's head Pod starts in containerd on a 2-core machine.
const uiTimeout = 3 * time.Minute

// chromium is the browser the test drives: it fails where CI is set and none is installed (.ci/run
// installs Debian's chromium), and skips elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: the UI test drives a real headless browser (apt-get install chromium; .ci/run does)")
	}
	t.Skip("no chromium on PATH: the UI test drives a real headless browser; install it with apt-get install chromium")
	return ""
}

// startUI runs `rayctl ui` against in and returns the URL it printed (with its token).
func startUI(t *testing.T, in *framework.Instance, ns string) string {
	t.Helper()
	bin, err := framework.Binary()
	must(t, "the rayctl binary", err)
	cmd := exec.Command(bin, "ui", "--data-dir", in.DataDir, "-n", ns)
	stdout, err := cmd.StdoutPipe()
	must(t, "rayctl ui's stdout", err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, "starting rayctl ui", cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("rayctl ui exited with %v after SIGTERM: %s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("rayctl ui still ran 10 s after SIGTERM")
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`).FindString(sc.Text()); u != "" {
				found <- u
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(time.Minute):
		t.Fatalf("rayctl ui printed no URL within a minute; stderr: %s", stderr.String())
	}
	return ""
}

// newBrowser starts a headless chromium for the test.
func newBrowser(t *testing.T, ctx context.Context, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.WindowSize(1500, 1700),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return bctx
}

// domHop is one hop element of the diagram, as the page drew it.
type domHop struct {
	Hop, Lane, To, Kind, Label string
}

// pageHops reads the diagram's hop elements in the order they are drawn.
func pageHops(ctx context.Context) ([]domHop, error) {
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll('#diagram g.hop')).map(g =>
		[g.dataset.hop, g.dataset.lane, g.dataset.to, g.dataset.kind, g.dataset.label])`))
	if err != nil {
		return nil, err
	}
	hops := make([]domHop, len(rows))
	for i, r := range rows {
		hops[i] = domHop{r[0], r[1], r[2], r[3], r[4]}
	}
	return hops, nil
}

// uiHop is an expected hop: its kind, lanes, object kind and a piece of its label.
type uiHop struct{ hop, lane, to, kind, label string }

func (w uiHop) match(h domHop) bool {
	return h.Hop == w.hop && h.Lane == w.lane && h.To == w.to && h.Kind == w.kind && strings.Contains(h.Label, w.label)
}

// matchedInOrder is how many of want occur in hops in order.
func matchedInOrder(hops []domHop, want []uiHop) int {
	i := 0
	for _, h := range hops {
		if i < len(want) && want[i].match(h) {
			i++
		}
	}
	return i
}

// screenshot writes the page as a PNG under _output/ (and to docs/ when RAYCTL_UI_DOCS_SCREENSHOT is set,
// to refresh the README's picture).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, "a screenshot", err)
	dir := repoPath("_output")
	must(t, "making _output", os.MkdirAll(dir, 0o755))
	must(t, "writing the screenshot", os.WriteFile(filepath.Join(dir, name), png, 0o644))
	t.Logf("screenshot: %s (%d bytes)", filepath.Join(dir, name), len(png))
	if docs := os.Getenv("RAYCTL_UI_DOCS_SCREENSHOT"); docs != "" && strings.Contains(name, docs) {
		must(t, "writing docs/ui.png", os.WriteFile(repoPath("docs", "ui.png"), png, 0o644))
	}
}

// waitPage evaluates cond (a JavaScript boolean expression) on the page until it holds; it fails the
// test with what describe says of the page then.
func waitPage(t *testing.T, ctx context.Context, what, cond string, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(uiTimeout)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %s (last error: %v); the page: %s", what, uiTimeout, err, describe())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestUI(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	in := framework.StartTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ray, err := rayclient.NewForConfig(in.Config)
	must(t, "a ray.io client", err)
	ns := in.NewNamespace(t, ctx, "ui-")
	start := time.Now()
	pageURL := startUI(t, in, ns)
	base := strings.SplitN(pageURL, "/?", 2)[0]

	// Without the token: 401; with it under another Host name (DNS rebinding): refused.
	for _, path := range []string{"/", "/api/objects", "/static/app.js", "/?token=0"} {
		resp, err := http.Get(base + path)
		must(t, "GET "+path, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, resp.StatusCode)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, pageURL, nil)
	req.Host = "rebound.example:" + strings.TrimPrefix(base, "http://127.0.0.1:")
	resp, err := http.DefaultClient.Do(req)
	must(t, "GET with another Host", err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET with Host %s: %d, want 403", req.Host, resp.StatusCode)
	}

	// With the token, the page loads, drops the token from its address and goes live.
	b := newBrowser(t, ctx, browser)
	must(t, "opening the page", chromedp.Do(b, chromedp.Navigate(pageURL), chromedp.WaitVisible(`#status.live`)))
	loc, err := chromedp.Run(b, chromedp.Location())
	must(t, "the page's address", err)
	if strings.Contains(loc, "token") {
		t.Errorf("the address still holds the token: %s", loc)
	}

	// A RayJob whose job runs long enough to watch: its row appears, and once selected its chain is drawn
	// hop by hop, from the head Pod's Ready write to the submission, while it runs.
	job := rayJobFromSample(t, "rayjob-http.yaml", "ui-job")
	job.Spec.Entrypoint = "sh -c 'echo hello from the ui test && sleep 15'"
	_, err = ray.RayV1().RayJobs(ns).Create(ctx, job, metav1.CreateOptions{})
	must(t, "creating RayJob ui-job", err)
	row := fmt.Sprintf(`#objects tr[data-kind="RayJob"][data-namespace=%q][data-name="ui-job"]`, ns)
	must(t, "selecting the RayJob", chromedp.Do(b, chromedp.Click(row)))
	want := []uiHop{
		{"kubelet-write", "kubelet", "apiserver", "Pod", "Ready=True"},
		{"api-write", "apiserver", "apiserver", "Pod", "accepted patch status"},
		{"informer", "apiserver", "raycluster", "Pod", "watch update"},
		{"map", "raycluster", "raycluster", "Pod", "→ RayCluster ui-job-"},
		{"enqueue", "raycluster", "raycluster", "RayCluster", "enqueue"},
		{"reconcile-start", "raycluster", "raycluster", "RayCluster", "Reconcile"},
		{"status-write", "raycluster", "apiserver", "RayCluster", "state=ready"},
		{"api-write", "apiserver", "apiserver", "RayCluster", "accepted update status"},
		{"informer", "apiserver", "rayjob", "RayCluster", "watch update"},
		{"map", "rayjob", "rayjob", "RayCluster", "→ RayJob ui-job"},
		{"enqueue", "rayjob", "rayjob", "RayJob", "enqueue"},
		{"reconcile-start", "rayjob", "rayjob", "RayJob", "Reconcile"},
		{"status-write", "rayjob", "apiserver", "RayJob", "jobDeploymentStatus=Running"},
		{"dashboard-call", "rayjob", "dashboard", "RayJob", "POST /api/jobs/"},
	}
	var hops []domHop
	seen := 0
	var before []domHop // a drawing with hops but not yet the submission: the chain came in live
	deadline := time.Now().Add(uiTimeout)
	for {
		hops, err = pageHops(b)
		must(t, "reading the diagram", err)
		seen = matchedInOrder(hops, want)
		if len(hops) > 0 && seen < len(want) && before == nil {
			before = hops
		}
		if seen == len(want) {
			break
		}
		if time.Now().After(deadline) {
			var lines strings.Builder
			for _, h := range hops {
				fmt.Fprintf(&lines, "  %s %s→%s %s: %s\n", h.Hop, h.Lane, h.To, h.Kind, h.Label)
			}
			t.Fatalf("the diagram lacks, in order, %v (matched %d of %d); drawn:\n%s", want[seen], seen, len(want), lines.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the diagram showed the chain to the submission %.1f s after rayctl ui started (%d hops drawn)", time.Since(start).Seconds(), len(hops))
	if before == nil {
		t.Error("the diagram showed no hop before the whole chain to the submission: hops must arrive as the RayJob starts")
	} else {
		t.Logf("before the submission the diagram showed %d hops, the first %s %s: %s", len(before), before[0].Hop, before[0].Lane, before[0].Label)
	}
	cur, err := ray.RayV1().RayJobs(ns).Get(ctx, "ui-job", metav1.GetOptions{})
	must(t, "reading RayJob ui-job", err)
	if cur.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Errorf("the RayJob is %s once the submission is drawn, want it still Running (the chain must arrive live)", cur.Status.JobDeploymentStatus)
	}
	// The list shows the RayJob's state as it moves.
	waitPage(t, b, "the RayJob's row shows Running", fmt.Sprintf(`(document.querySelector(%q)?.dataset.state || "").startsWith("Running")`, row),
		func() string { return "" })
	// Hovering a hop shows its detail; the latency table times the line from the Ready write to the POST.
	tip, err := chromedp.Run(b, chromedp.Evaluate[string](`(() => {
		const g = document.querySelector('#diagram g.hop-dashboard-call[data-label^="POST"]');
		g.dispatchEvent(new MouseEvent('mouseenter', {clientX: 20, clientY: 20}));
		return document.querySelector('#tip').textContent; })()`))
	must(t, "hovering the submission", err)
	if !strings.Contains(tip, "dashboard POST http://") || !strings.Contains(tip, "→ 200") {
		t.Errorf("the submission's hover text %q lacks the call and its answer", tip)
	}
	table, err := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('#latency-title').textContent + " | " + document.querySelector('#latency-total').textContent`))
	must(t, "reading the latency table", err)
	if !strings.Contains(table, "Hop latencies, head Pod Ready → job submitted") || !strings.Contains(table, " ms over ") {
		t.Errorf("latency table %q, want the line from the head Pod's Ready write to the submission", table)
	}
	_, err = chromedp.Run(b, chromedp.Evaluate[bool](`document.querySelector('#tip').hidden = true`))
	must(t, "hiding the hover text", err)
	// The diagnosis beside it follows the chain: once the head is ready and the job runs, no check fails.
	waitPage(t, b, "the running RayJob's diagnosis without a cause", `document.querySelector('#verdict').className === "pass"`, func() string {
		v, _ := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('#verdict').textContent`))
		return fmt.Sprintf("verdict %q", v)
	})
	screenshot(t, b, "ui-rayjob.png")

	// A RayJob whose head can never be scheduled: the diagnosis on the page names the cause.
	starved := rayJobFromSample(t, "rayjob-http.yaml", "ui-starved")
	res := &starved.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Resources
	res.Requests[corev1.ResourceCPU] = resource.MustParse("1000")
	res.Limits[corev1.ResourceCPU] = resource.MustParse("1000")
	_, err = ray.RayV1().RayJobs(ns).Create(ctx, starved, metav1.CreateOptions{})
	must(t, "creating RayJob ui-starved", err)
	must(t, "selecting the stuck RayJob", chromedp.Do(b, chromedp.Click(`#objects tr[data-kind="RayJob"][data-name="ui-starved"]`)))
	verdict := func() string {
		v, _ := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('#verdict').textContent`))
		return fmt.Sprintf("verdict %q", v)
	}
	waitPage(t, b, "the stuck RayJob's verdict", `document.querySelector('#verdict').dataset.cause === "cluster-not-ready" &&
		document.querySelector('#verdict').textContent.includes("Insufficient cpu")`, verdict)
	t.Logf("the page's %s", verdict())
	failed, err := chromedp.Run(b, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#checks li.fail')).map(li => li.dataset.id)`))
	must(t, "reading the checklist", err)
	if strings.Join(failed, ",") == "" || failed[0] != "g" {
		t.Errorf("failing checks %v, want g (the RayCluster not ready) first", failed)
	}
	screenshot(t, b, "ui-diagnose.png")

	// Workshop mode: large type, and the demo button applies the demo RayJob through the page (its POST
	// carries the CSRF header).
	must(t, "workshop mode", chromedp.Do(b, chromedp.Navigate(base+"/?workshop=1"), chromedp.WaitVisible(`body.workshop #status.live`)))
	must(t, "pressing the demo button", chromedp.Do(b, chromedp.Click(`#demo`)))
	waitPage(t, b, "the demo RayJob selected", `/^RayJob .*\/rayjob-http-[a-z0-9]{5}$/.test(document.querySelector('#chain-title').textContent)`,
		func() string { return "" })
	jobs, err := ray.RayV1().RayJobs(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing RayJobs", err)
	demo := ""
	for _, j := range jobs.Items {
		if strings.HasPrefix(j.Name, "rayjob-http-") {
			demo = j.Name
		}
	}
	if demo == "" {
		t.Fatal("the demo button applied no RayJob")
	}
	bg := metav1.DeletePropagationBackground
	must(t, "deleting the demo RayJob", ray.RayV1().RayJobs(ns).Delete(ctx, demo, metav1.DeleteOptions{PropagationPolicy: &bg}))

	// Replay: once the first RayJob is Complete, workshop mode redraws its chain from the first hop, slowly.
	must(t, "the finished RayJob in workshop mode", chromedp.Do(b,
		chromedp.Navigate(fmt.Sprintf("%s/?workshop=1#RayJob/%s/ui-job", base, ns)), chromedp.WaitVisible(`body.workshop #status.live`)))
	waitPage(t, b, "the replay button of the finished RayJob", `!document.querySelector('#replay').hidden`, func() string {
		st, _ := chromedp.Run(b, chromedp.Evaluate[string](fmt.Sprintf(`[document.querySelector(%q)?.dataset.state,
			document.querySelector('#chain-title').textContent, document.querySelector('#chain-summary').textContent].join(" | ")`, row)))
		return "the RayJob's state, the chain's title and summary: " + st
	})
	total, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('#diagram g.hop').length`))
	must(t, "counting the hops", err)
	must(t, "pressing replay", chromedp.Do(b, chromedp.Click(`#replay`)))
	early, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('#diagram g.hop').length`))
	must(t, "counting the hops during the replay", err)
	if early >= total {
		t.Errorf("right after replay was pressed the diagram shows %d of %d hops, want a few", early, total)
	}
	waitPage(t, b, "the replay drawing more hops", fmt.Sprintf(`document.querySelectorAll('#diagram g.hop').length > %d`, early), func() string { return "" })
	for _, name := range []string{"ui-starved", "ui-job"} {
		must(t, "deleting RayJob "+name, ray.RayV1().RayJobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}))
	}
}
